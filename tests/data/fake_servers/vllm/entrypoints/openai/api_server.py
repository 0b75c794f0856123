"""Fake `python -m vllm.entrypoints.openai.api_server`: one engine core."""

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))))
import _fake

_fake.run(["VLLM::EngineCore"])
