"""Fixtures of the core's tests: ``humanoid`` is a fresh default humanoid per test;
``make_humanoid`` and ``shipped_controller`` are :mod:`helpers.robots`' builders."""

from __future__ import annotations

import pytest

import wb_sim
from helpers.robots import make_humanoid, shipped_controller


@pytest.fixture
def humanoid() -> wb_sim.Simulator:
    return make_humanoid()


@pytest.fixture(name="make_humanoid")
def _make_humanoid_fixture():
    return make_humanoid


@pytest.fixture(name="shipped_controller")
def _shipped_controller_fixture():
    return shipped_controller
