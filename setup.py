"""Build configuration beyond pyproject.toml: the optional C accelerator.

`tracehound._speedups` reads OTLP protobuf bytes directly (attribute decoding, one pass over a
request for span ids and GenAI keys) and runs the evaluators' hot loops (tokens, the drift
embedding, the evidence index). It is optional: without a C compiler the build skips it and
tracehound runs the same pure-Python code paths, with the same results, only slower (the drift
scorer's distances, whose C sums run in another order than numpy's: the same within 1e-12).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracehound._speedups",
            sources=[
                "src/tracehound/_speedups.c",
                "src/tracehound/_speedups_core.c",
                "src/tracehound/_speedups_drift.c",
                "src/tracehound/_speedups_embed.c",
                "src/tracehound/_speedups_engine.c",
                "src/tracehound/_speedups_evidence.c",
                "src/tracehound/_speedups_otlp.c",
                "src/tracehound/_speedups_steps.c",
                "src/tracehound/_speedups_text.c",
            ],
            depends=[
                "src/tracehound/_speedups.h",
                "src/tracehound/_speedups_tokens.h",
                "src/tracehound/_speedups_wire.h",
            ],
            optional=True,
        )
    ]
)
