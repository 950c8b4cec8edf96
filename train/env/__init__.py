"""The trainer environment: tasks, the extraction contract, sandboxed execution, grading and
the humanrank reward. It turns a completion into a node record.

    from train.env import load_task, evaluate, LocalExecutor, Limits
    task = load_task("mini-tabular-accuracy")
    records = evaluate(task, completions, LocalExecutor(), Limits(timeout_s=60))

Importing this package is light: numpy/pandas load only when a submission is graded, psutil
when a node runs, ray only in ``RayExecutor``.
"""
from train.env.errors import EnvError, TaskLayoutError, TaskNotFoundError
from train.env.executors import Executor, LocalExecutor, RayExecutor
from train.env.extract import Extraction, extract
from train.env.grading import Grade, humanrank, medal_for, medal_thresholds
from train.env.node import evaluate, evaluate_code, node_record
from train.env.reward import reward_for
from train.env.sandbox import ExecResult, Limits, SandboxJob, capabilities, run_job
from train.env.tasks import Task, bundled_task_names, load_task

__all__ = [
    "EnvError", "ExecResult", "Executor", "Extraction", "Grade", "Limits", "LocalExecutor",
    "RayExecutor", "SandboxJob", "Task", "TaskLayoutError", "TaskNotFoundError",
    "bundled_task_names", "capabilities", "evaluate", "evaluate_code", "extract", "humanrank",
    "load_task", "medal_for", "medal_thresholds", "node_record", "reward_for", "run_job",
]
