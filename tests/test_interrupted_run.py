"""A Kedro run stopped by SIGTERM or Ctrl-C ends its MLflow run as KILLED, not FINISHED."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap

import mlflow
import pytest

# A process that does what `kedro run` does with MLflow: kedro-mlflow opens the run, then the
# hooks run; then the pipeline is interrupted (or finishes, and kedro-mlflow ends the run).
SCRIPT = textwrap.dedent(
    """
    import os, signal, sys, time
    import mlflow
    from ih_kedro.hooks import InterruptedRunHooks
    how = sys.argv[1]
    mlflow.set_tracking_uri(os.environ["STORE"])
    mlflow.start_run(run_name="kedro run")
    print(mlflow.active_run().info.run_id, flush=True)
    hooks = InterruptedRunHooks()
    hooks.before_pipeline_run({}, None, None)
    if how == "fork":  # a forked worker (a multiprocessing pool's) keeps SIGTERM's default
        child = os.fork()
        if child == 0:
            time.sleep(60)
            os._exit(0)
        time.sleep(0.5)
        os.kill(child, signal.SIGTERM)
        _, status = os.waitpid(child, 0)
        assert os.WIFSIGNALED(status) and os.WTERMSIG(status) == signal.SIGTERM, status
        hooks.after_pipeline_run({}, None, None, None)
        mlflow.end_run()
    elif how == "sigterm":
        os.kill(os.getpid(), signal.SIGTERM)
        time.sleep(60)
    elif how == "ctrl-c":
        raise KeyboardInterrupt
    else:
        hooks.after_pipeline_run({}, None, None, None)
        mlflow.end_run()
    """
)


@pytest.mark.parametrize(
    ("how", "returncode", "status"),
    [("sigterm", 128 + signal.SIGTERM, "KILLED"), ("ctrl-c", -signal.SIGINT, "KILLED"),
     ("finished", 0, "FINISHED"), ("fork", 0, "FINISHED")],
)  # fmt: skip
def test_interrupted_kedro_run_is_marked_killed(tmp_path, how, returncode, status):
    store = f"sqlite:///{tmp_path / 'mlflow.db'}"
    result = subprocess.run(
        [sys.executable, "-c", SCRIPT, how],
        env={**os.environ, "STORE": store},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert result.returncode == returncode, result.stderr[-2000:]
    run_id = result.stdout.strip().splitlines()[-1]
    assert mlflow.MlflowClient(store).get_run(run_id).info.status == status
