"""What the loop's nodes use besides the state: tools, knowledge, backend, settings, paths.

Frozen: everything a node learns during the run (the workspace profile included) goes into the
state, which the checkpointer saves, so a resumed run sees exactly what the killed one saw.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autofe.agents.llm import LLMBackend
from autofe.agents.settings import LoopSettings
from autofe.agents.toolbox import Toolbox
from autofe.featurespec import FeatureSpec
from autofe.knowledge_base.retrieve import KnowledgeBase

Node = Any
"""An async node function (LangGraph's own node protocols are too narrow to name here)."""


@dataclass(frozen=True)
class LoopContext:
    """Everything the nodes use besides the state."""

    db: Path
    store: Path
    out_dir: Path
    tools: Toolbox
    kb: KnowledgeBase
    backend: LLMBackend
    settings: LoopSettings = field(default_factory=LoopSettings)
    clock: Callable[[], float] = time.monotonic
    seed: tuple[FeatureSpec, ...] = ()
    """Features proposed again in round 0 before the backend's own (a warm start from the
    catalog of the model a nightly run may replace), so each is re-checked like a new one."""
