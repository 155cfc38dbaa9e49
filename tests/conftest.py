"""Shared fixtures: the project's own tests use the same helpers we ship."""

from __future__ import annotations

from langgraph_s3.testing import use_dummy_credentials

use_dummy_credentials()
