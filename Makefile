# The two set-up commands of the README. Each creates .venv and installs what it needs.
.PHONY: demo test lint bench

demo:
	infra/demo.sh

test:
	infra/test.sh

lint:
	infra/setup_venv.sh && .venv/bin/ruff check . && .venv/bin/ruff format --check . && .venv/bin/mypy
