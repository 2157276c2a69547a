"""Build configuration beyond pyproject.toml: the optional C accelerator.

`tracehound._speedups` reads OTLP protobuf bytes directly (attribute decoding, one pass over a
request for span ids and GenAI keys) and runs the evaluators' hot loops (the evidence index,
the drift embedding). It is optional: without a C compiler the build skips it and
tracehound runs the same pure-Python code paths, with the same results, only slower (the drift
scorer's distances, whose C sums run in another order than numpy's: the same within 1e-12).
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracehound._speedups",
            sources=[
                "src/native/_speedups.c",
                "src/native/_speedups_drift.c",
                "src/native/_speedups_embed.c",
                "src/native/_speedups_evidence.c",
                "src/native/_speedups_otlp.c",
            ],
            depends=[
                "src/native/_speedups.h",
                "src/native/_speedups_tokens.h",
                "src/native/_speedups_wire.h",
            ],
            optional=True,
        )
    ]
)
