from pathlib import Path

HERE = Path(__file__).parent / "golden"


def test_golden(autoflow_golden):
    autoflow_golden.check_conversion(HERE / "step.py")


def test_behaviour(autoflow_golden):
    autoflow_golden.check_behaviour(HERE / "step.py", {"step": [(1.0,), (-2.0,)]})
