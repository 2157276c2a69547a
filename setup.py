"""Build configuration beyond pyproject.toml: the optional C accelerator.

`tracehound._speedups` reads OTLP protobuf bytes directly (attribute decoding, one pass over a
request for span ids and GenAI keys) and runs the evaluators' hot loops (the evidence index,
the drift embedding's hashing). It is optional: without a C compiler the build skips it and
tracehound runs the same pure-Python code paths, with the same results, only slower.
"""

from setuptools import Extension, setup

setup(
    ext_modules=[
        Extension(
            "tracehound._speedups",
            sources=[
                "src/native/_speedups.c",
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
