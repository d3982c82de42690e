"""Blind human labelling: what to label next (sample), label records (labels), the app (app).

`konkord.stages.label.sample` and `konkord.stages.label.labels` are light to import (no streamlit, no
litellm): calibrate and report read labels and the comparison pool through them.

Also owns the simulated labellers of demo runs (simulated). Label is a stage: it reads a run's
answers through stages.run. May import: stages.run, stages.current and every layer below
stages.
"""

from konkord.stages.label.labels import (
    current_labels,
    record_label,
    undo_last_label,
    withdraw_label,
)
from konkord.stages.label.sample import (
    Comparison,
    LabelQueue,
    QueueItem,
    comparison_pool,
    label_queue,
    pool_for_run,
    stratified_order,
)

__all__ = [
    "Comparison",
    "LabelQueue",
    "QueueItem",
    "comparison_pool",
    "current_labels",
    "label_queue",
    "pool_for_run",
    "record_label",
    "stratified_order",
    "undo_last_label",
    "withdraw_label",
]
