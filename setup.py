"""Installs t2t_lite.

The top-level folders problems/, hparams/ and bin/ are packaged as t2t_lite.problems,
t2t_lite.hparams and t2t_lite.bin, so the repository reads by role while imports stay under one
namespace. Editable installs (`pip install -e .`) honour the same mapping.
"""

from setuptools import find_packages, setup

PACKAGES = [p for p in find_packages(include=["t2t_lite", "t2t_lite.*"])]
PACKAGES += ["t2t_lite.problems", "t2t_lite.hparams", "t2t_lite.bin"]

CONSOLE_SCRIPTS = [
    f"t2t-{name.replace('_', '-')}=t2t_lite.bin.t2t_{name}:run"
    for name in (
        "info",
        "datagen",
        "train",
        "decode",
        "bleu",
        "evalb",
        "export",
        "query",
        "avg_checkpoints",
        "visualize",
        "serve",
    )
]

# t2t-serve: the web page and its API (t2t_lite.serve.web).
SERVE_REQUIRES = ["fastapi>=0.110", "uvicorn>=0.29"]
# t2t-export --format=ctranslate2 (CTranslate2's converter specification API).
CTRANSLATE2_REQUIRES = ["ctranslate2>=4.4,<5"]
# t2t-query --protocol=grpc (TF Serving's PredictionService; its protos need TensorFlow).
GRPC_REQUIRES = ["tensorflow-serving-api>=2.21,<2.22", "grpcio>=1.60"]

setup(
    name="t2t_lite",
    version="0.1.0",
    description="The Transformer of 'Attention Is All You Need' on TensorFlow 2 and Keras 3.",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    license_files=["LICENSE"],
    classifiers=[
        "Programming Language :: Python :: 3",
        "Operating System :: POSIX :: Linux",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
        "Intended Audience :: Science/Research",
    ],
    python_requires=">=3.10",
    packages=PACKAGES,
    # The page of t2t-serve: its HTML, CSS and JavaScript, served as they are.
    package_data={"t2t_lite.serve.web": ["static/*"]},
    package_dir={
        "t2t_lite.problems": "problems",
        "t2t_lite.hparams": "hparams",
        "t2t_lite.bin": "bin",
    },
    install_requires=[
        "tensorflow>=2.21,<2.22",
        "tensorflow-text>=2.21,<2.22",
        "keras>=3.10,<4",
        "tensorflow-datasets>=4.9,<5",
        # tensorflow-datasets 4.9 imports it on Python 3.11 without declaring it.
        "importlib_resources>=5",
        "sacrebleu>=2.4,<3",
        "absl-py>=2",
        "sentencepiece>=0.2,<0.3",
        "numpy>=1.26",
        "matplotlib>=3.7",
    ],
    extras_require={
        "serve": SERVE_REQUIRES,
        "ctranslate2": CTRANSLATE2_REQUIRES,
        "grpc": GRPC_REQUIRES,
        "test": SERVE_REQUIRES
        + CTRANSLATE2_REQUIRES
        + GRPC_REQUIRES
        + [
            "pytest>=8",
            # FastAPI's TestClient, and the browser test (the system's Chromium, not a download).
            "httpx>=0.27",
            "playwright>=1.40",
            "ruff>=0.5",
            "import-linter>=2.1",
            # `make lint` builds the package without build isolation.
            "setuptools>=68",
            "wheel",
        ],
    },
    entry_points={"console_scripts": CONSOLE_SCRIPTS},
)
