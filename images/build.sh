#!/usr/bin/env bash
# Glue: the image build is `proctor images build` (proctor/imagebuild/); see its --help.
exec "$(dirname "${BASH_SOURCE[0]}")/../.venv/bin/python" -m proctor.cli images build "$@"
