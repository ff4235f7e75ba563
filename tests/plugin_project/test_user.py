def test_golden(autoflow_golden):
    autoflow_golden.check_conversion("golden/step.py")


def test_golden_of_one_function(autoflow_golden):
    autoflow_golden.check_conversion("golden/step.py", function="step")


def test_behaviour(autoflow_golden):
    autoflow_golden.check_behaviour("golden/step.py", {"step": [(1.0,), (-2.0,)]})
