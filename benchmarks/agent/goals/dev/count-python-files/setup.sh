#!/usr/bin/env bash
# A small Python project: .py files at several depths, plus compiled files, a backup and
# files whose names merely contain "py".
set -euo pipefail
mkdir -p project/app/utils project/app/__pycache__ project/tests project/scripts project/docs project/notebooks
cat > project/README.md <<'X'
# shop

Run `python main.py` to start. Configuration lives in pyproject.toml.
X
cat > project/pyproject.toml <<'X'
[project]
name = "shop"
version = "0.3.1"
X
printf 'from app import views\n\nif __name__ == "__main__":\n    views.serve()\n' > project/main.py
printf 'from setuptools import setup\nsetup()\n' > project/setup.py
printf '' > project/app/__init__.py
printf 'class Product:\n    pass\n' > project/app/models.py
printf 'def serve():\n    print("serving")\n' > project/app/views.py
printf 'compiled' > project/app/__pycache__/models.cpython-311.pyc
printf 'compiled' > project/app/__pycache__/views.cpython-311.pyc
printf '' > project/app/utils/__init__.py
printf 'def slug(s):\n    return s.lower()\n' > project/app/utils/strings.py
printf 'def slug(s):\n    return s\n' > project/app/utils/strings.py.bak
printf 'def clamp(x, lo, hi):\n    return max(lo, min(x, hi))\n' > project/app/utils/helpers.py
printf 'def test_product():\n    assert True\n' > project/tests/test_models.py
printf 'def test_serve():\n    assert True\n' > project/tests/test_views.py
printf 'import pytest\n' > project/tests/conftest.py
printf '#!/bin/sh\necho deploying\n' > project/scripts/deploy.sh
printf 'print("migrating")\n' > project/scripts/migrate.py
printf '# API\n\nSee app/views.py.\n' > project/docs/api.md
printf 'example: python -m app.views\n' > project/docs/example_py.txt
printf '{"cells": []}\n' > project/notebooks/analysis.ipynb
