"""The site features the policy reads, shared by train.py and apply.py.

They are the fields of kiln's `SiteFeatures` (protocol/src/features.rs; `kiln
export --schema` documents them), plus whether the stock compiler inlined the
site, since flipping a site means opposite things for the two, the call's
block frequency (its calls per entry of its caller), and shares of the caller's
optimised code (vectorised, and grown by inlining everything).
"""

import os
import sys

import numpy as np
import pandas as pd

FEATURES = [
    "chain_length",
    "inline_cost",
    "inline_threshold",
    "caller_instructions",
    "caller_blocks",
    "callee_instructions",
    "callee_blocks",
    "loop_depth",
    "callee_call_sites",
    "callee_recursive",
    "callee_external",
    "constant_arguments",
    "caller_self_cost",
    "caller_inclusive_cost",
    "caller_calls",
    "callee_self_cost",
    "callee_inclusive_cost",
    "site_calls",
    "caller_code_instructions",
    "caller_code_vector",
    "caller_code_calls",
    "caller_code_loops",
    "callee_code_kept",
    "callee_code_instructions",
    "callee_code_vector",
    "callee_code_calls",
    "callee_code_loops",
    "caller_inlined_code_instructions",
    "caller_inlined_code_vector",
    "caller_inlined_code_calls",
    "caller_inlined_code_loops",
    "site_block_frequency",
    "caller_vector_share",
    "caller_inlined_growth",
    "caller_inlined_vector_share",
    "stock_inline",
]


def normalise(frame: pd.DataFrame) -> pd.DataFrame:
    """Column names in snake case (kiln's JSON spells features in kebab case),
    and whether the stock compiler inlined the site."""
    frame = frame.rename(columns=lambda c: c.replace("-", "_"))
    if "stock_inline" not in frame and "stock" in frame:
        frame["stock_inline"] = frame["stock"] == "inline"
    if "site_calls" in frame and "caller_calls" in frame:
        # How often the call runs per entry of its caller (null where either is).
        calls = frame["site_calls"].astype("Float64")
        entries = frame["caller_calls"].astype("Float64")
        frame["site_block_frequency"] = (calls / entries).where(entries > 0)
    if "caller_code_instructions" in frame:
        # What the optimiser made of the caller, as shares that compare across programs:
        # how vectorised it is as stock built it and with every inline, and how much
        # inlining everything grew it (null where either build kept no copy of it).
        size = frame["caller_code_instructions"].astype("Float64")
        inlined = frame["caller_inlined_code_instructions"].astype("Float64")
        frame["caller_vector_share"] = (frame["caller_code_vector"].astype("Float64") / size
                                        ).where(size > 0)
        frame["caller_inlined_growth"] = (inlined / size).where(size > 0)
        frame["caller_inlined_vector_share"] = (
            frame["caller_inlined_code_vector"].astype("Float64") / inlined).where(inlined > 0)
    return frame


def feature_matrix(frame: pd.DataFrame) -> np.ndarray:
    """The features as floats; a feature kiln could not have is NaN, never 0."""
    columns = []
    for name in FEATURES:
        if name in frame:
            column = frame[name].astype("object").map(
                lambda v: np.nan if v is None or v is pd.NA else float(v)
            )
            columns.append(column)
        else:
            columns.append(pd.Series(np.nan, index=frame.index))
    return np.column_stack([c.to_numpy(dtype=float) for c in columns])


def exit_skipping_teardown(code):
    """Exits with `code` once the work is done, skipping the interpreter's
    teardown: pyarrow's thread pools (which read_parquet starts) may abort it
    with "terminate called without an active exception", exit 134, after
    everything was written (apache/arrow#34314; seen here under load)."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code or 0)
