"""Drop-in replacements for the earlier tools' entry points, computed by tracehound's engine."""
