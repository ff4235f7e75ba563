import os

import pytest

# The project's own tests run strict (every fallback is an error) unless a
# test says otherwise; see the README's fallback policy.
os.environ.setdefault("AUTOFLOW_STRICT", "1")

# The tests compile thousands of small programs; LLVM's optimizations of each (which
# change its speed, not its results) are about a sixth of the fast tier's CPU time. Set
# before JAX starts its backend; a developer's own XLA_FLAGS are kept as they are.
os.environ.setdefault("XLA_FLAGS", "--xla_backend_optimization_level=0 "
                                   "--xla_llvm_disable_expensive_passes=true")

# Run only through tests/test_pytest_plugin.py, in a pytest subprocess, as a user would.
collect_ignore = ["plugin_project"]

# autoflow's own golden files use its pytest plugin (`pytest --autoflow-update`).
# Installed packages register it via the pytest11 entry point; load it here
# only when that is missing (a source checkout), never twice.
def _plugin_installed():
    from importlib.metadata import entry_points
    return any(ep.value == "autoflow.pytest_plugin" for ep in entry_points(group="pytest11"))


if not _plugin_installed():
    pytest_plugins = ["autoflow.pytest_plugin"]


def pytest_sessionstart(session):
    """Run autoflow's check of JAX's private API once, before any test: on a JAX that
    lacks some of it (the oldest supported one), its one warning is given here, not
    inside the first test that stages a loop (where a test that asserts "no warning"
    would see it). tests/test_jax_paths.py checks the warning for every private path in
    this process, tests/test_jax_internals.py in fresh processes."""
    import warnings

    from autoflow.runtime import jax as jx

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        jx.primitives()


# Test tiers. `pytest -q` (the README's command) runs the fast tier: every construct
# and public entry point, with a target of 300 s on 2 cores with one of them busy (267 s
# measured, in two worker processes: pytest_xdist_auto_num_workers). `--tier slow` runs the
# rest except `signal`; `--tier signal` the timing-dependent signal test, best alone
# on a quiet machine; `--tier all` everything. `.ci/run` runs fast, slow and signal,
# so CI runs every test once. A test is slow when a file or test id below names it
# (kept here, in one table, rather than as markers spread over the files), or when
# it is marked `@pytest.mark.slow` / `@pytest.mark.signal` itself. An entry that
# matches no collected test is an error, so the table cannot go stale silently.
SLOW = {
    # whole files
    "tests/test_ecosystem.py": "ecosystem libraries (Equinox, Flax, optax, diffrax)",
    "tests/test_notebook.py": "a notebook run in a Jupyter kernel",
    "tests/test_fuzz.py": "the differential fuzzer's 300 programs (AUTOFLOW_FUZZ_EXAMPLES)",
    "tests/test_scaling.py": "conversion scaling up to thousands of lines",
    "tests/test_benchmarks_quick.py": "the benchmark suite's smoke run",
    "tests/test_counting.py::test_the_flat_loop_behind_its_cond_adds_no_reduction":
        "two nests compiled to count their reductions (a cost property, not a result)",
    "tests/test_jax_internals.py": "fault injection, each fault in a fresh process",
    "tests/test_peer_styles.py": "376 programs in other converters' styles (95 s); the "
                                 "fast tier has each construct in tests/semantics",
    "tests/test_algorithms.py": "160+ textbook numeric algorithms (issue 43), each under jit, "
                                "vmap and grad; the fast tier has each construct in "
                                "tests/test_strings.py and tests/test_long_tail.py",
    # single tests (prefixes of test ids: every parameter of a test unless one is named)
    "tests/semantics/test_nested_returns.py::test_nested_returns_traced_conditions":
        "depths 1-8, every path traced (30-80 s each); the fixtures return_* are fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[-1.0]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[1.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[2.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[3.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_with_returns[4.5]": "[0.5] is fast",
    "tests/test_gradients.py::test_equinox_filter_checkpoint": "an ecosystem library",
    "tests/test_stored_residuals.py::test_grad_of_grad":
        "compiles for 25 s; tests/test_gradients.py::test_reverse_over_reverse is fast",
    "tests/semantics/test_runtime_errors.py::test_more_math_functions":
        "the fast tier has sqrt, log, exp, acos, pow, fmod, gamma, floor",
    "tests/semantics/test_runtime_errors.py::test_more_tables":
        "the fast tier has lists, tuples, NumPy arrays, lists of lists, loops and writes",
    "tests/semantics/test_runtime_errors.py::test_a_check_in_a_loop_test[insertion_sort-":
        "tests/test_algorithms.py has it too; the fast tier has the loop tests' checks",
    "tests/semantics/test_runtime_errors.py::test_math_under_grad[acos-": "[sqrt], [log] are fast",
    "tests/semantics/test_runtime_errors.py::test_math_under_grad[gamma-": "[sqrt], [log] are fast",
    "tests/semantics/test_runtime_errors.py::test_a_key_a_loop_sets_under_grad":
        "the keys' flags under jit and vmap are fast",
    "tests/semantics/test_runtime_errors.py::test_checks_carried_out_of_loops[nested_sqrt-":
        "[grid_walk] is fast",
    "tests/semantics/test_nested_returns.py::test_every_if_converts_at_depth_20": "depth 20",
    "tests/semantics/test_nested_returns.py::test_return_inside_if_inside_loop": "every placement, traced",
    "tests/test_gradients.py::test_any_checkpoint_budget_gives_the_same_gradient": "long loops, many budgets",
    "tests/test_gradients.py::test_higher_order_through_checkpoint": "third-order derivatives of a long loop",
    "tests/test_gradients.py::test_reverse_over_reverse": "second-order reverse mode",
    "tests/test_gradients.py::test_checkpointed_scan_body_calling_a_converted_loop": "a scan of checkpointed loops",
    # The gradient compositions: the fast tier runs every composition on one program
    # (data_while), the slow tier on the others.
    "tests/test_gradients.py::test_reverse_mode_compositions[range_break-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[nested-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[range_return-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_compositions[while_in_while-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[nested-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[range_break-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[range_return-": "other programs",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[while_in_while-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[nested-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[range_return-": "other programs",
    "tests/test_gradients.py::test_checkpoint_around_a_loop_under_vmap[nested-": "other programs",
    "tests/test_gradients.py::test_second_order[nested]": "other programs",
    "tests/test_gradients.py::test_second_order[range_break]": "other programs",
    "tests/test_vmap_loops.py::test_vmap_of_vmap_and_grad_through_masked_loops": "vmap of vmap of grad",
    "tests/test_direct_lowering.py::test_direct_lowering_compiles_to_the_same_program[1]": "[0] is fast",
    "tests/test_direct_lowering.py::test_direct_lowering_compiles_to_the_same_program[2]": "[0] is fast",
    # Issue 45: the fast tier within 300 s on 2 cores with one busy. Each construct stays
    # in the fast tier (the fixtures run eagerly and under jit, the semantics family);
    # what moves is a second or third way of running the same construct.
    "tests/test_fixtures.py::test_grad": "jax.grad of each fixture; the fast tier has the "
                                         "gradient compositions of data_while",
    "tests/test_fixtures.py::test_vmap": "jax.vmap of each fixture; the fast tier has "
                                         "test_vmap_loops and the semantics family's vmap",
    "tests/test_convert_fidelity.py::test_converted_fixture_output_runs_like_the_input":
        "the faithful printer's output of each fixture, run (it is the unparser's program: "
        "test_faithful_output_is_the_unparsers_program, fast)",
    "tests/test_examples.py::test_example_runs[bisection]": "collatz and newton run in the "
        "fast tier; every example's first call is traced there (test_check_agrees)",
    "tests/test_examples.py::test_example_runs[distributed]": "two processes",
    "tests/test_examples.py::test_example_runs[greedy_decode]": "as bisection",
    "tests/test_examples.py::test_example_runs[kmeans]": "as bisection",
    "tests/test_examples.py::test_example_runs[line_search]": "as bisection",
    "tests/test_examples.py::test_example_runs[mandelbrot]": "as bisection",
    "tests/test_examples.py::test_example_runs[ode_rk45]": "as bisection",
    "tests/test_examples.py::test_example_runs[sinkhorn]": "as bisection",
    "tests/test_pytest_plugin.py::test_plugin_reports_stale_goldens_and_behaviour_mismatches":
        "five pytest processes; the golden update and pass run in the fast tier",
    "tests/test_gradients.py::test_second_order[data_while]": "second order",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-jit(grad(convert))]":
        "the fast tier has grad(convert), grad(autoflow.jit)",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-grad(jax.jit(convert))]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-autoflow.jit(grad(convert))]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-vjp(autoflow.jit)]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-value_and_grad(autoflow.jit)]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[data_while-vmap(grad(autoflow.jit))]":
        "the fast tier has grad(sum(vmap(autoflow.jit)))",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[data_while-jit(vmap(grad(convert)))]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[data_while-grad(sum(jit(vmap(convert))))]":
        "as above",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[data_while-vmap(autoflow.jit(grad(convert)))]":
        "as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-grad(checkpoint(convert))]":
        "the fast tier has grad(checkpoint(autoflow.jit))",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-jit(grad(remat(convert)))]":
        "as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-grad(checkpoint(policy=dots_saveable))]":
        "a policy, as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-grad(checkpoint(policy=everything_saveable))]":
        "a policy, as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-grad(checkpoint(policy=nothing_saveable, prevent_cse=False))]":
        "a policy, as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop[data_while-vjp(checkpoint(autoflow.jit))]":
        "as above",
    "tests/test_gradients.py::test_checkpoint_around_a_loop_under_vmap[data_while-":
        "checkpoint under vmap",
    "tests/test_gradients.py::test_checkpoint_with_values_the_body_closes_over_and_vector_carries":
        "test_gradient_with_respect_to_values_the_body_closes_over and test_vector_carry "
        "are fast",
    "tests/test_gradients.py::test_for_over_an_array_with_a_while_inside": "nested loops",
    "tests/test_gradients.py::test_reverse_over_forward": "second order",
    "tests/test_gradients.py::test_forward_mode[while_in_while]": "[data_while] is fast",
    "tests/test_gradients.py::test_forward_mode[nested]": "[data_while] is fast",
    "tests/test_gradients.py::test_forward_mode[range_return]": "[data_while] is fast",
    "tests/test_vmap_loops.py::test_if_in_loop_under_vmap_values_and_derivatives":
        "derivatives of every lane; test_untaken_branch_loop_does_not_run_for_its_lanes "
        "and test_batched_break_counter_per_lane are fast",
    "tests/test_vmap_loops.py::test_if_with_loops_under_vmap": "as above",
    "tests/test_lane_machine.py::test_flat_lanes_under_grad": "grad of the flat lanes",
    "tests/test_lane_machine.py::test_flat_lanes_compose_with_jit_inside_vmap": "a composition",
    "tests/semantics/test_loop_exits.py::test_return_values_in_loops_match_python":
        "every placement of a return in a loop; the fixtures return_* are fast",
    "tests/semantics/test_nested_returns.py::test_nested_returns_int_values_concrete[4]":
        "[1] is fast",
    "tests/semantics/test_nested_returns.py::test_variable_bound_only_where_nothing_returned":
        "test_variable_unbound_on_a_falling_path_is_not_filled is fast",
    "tests/test_lowering.py::test_gradient_of_a_vmapped_if[matvec_loop]": "the other programs "
        "are fast",
    "tests/test_lowering.py::test_kept_cond_in_a_loop_batches_without_broadcasting":
        "test_a_branch_with_a_loop_is_a_select_whose_loop_runs_only_when_taken is fast",
    "tests/test_vocabulary_tail.py::test_max_picks_the_first_largest_and_keeps_nan_as_python_does":
        "NaN orders; the filtered reductions are fast",
    "tests/test_vocabulary.py::test_typed_keys_carried[-1.0-": "[1.0-*] is fast",
    "tests/test_vocabulary.py::test_typed_keys_under_vmap": "typed keys carried is fast",
    "tests/test_direct_lowering.py::test_direct_lowering_compiles_to_the_same_program[3]":
        "[0] is fast",
    "tests/semantics/test_long_chains.py::test_chain_values[-3.0]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_values[-1.5]": "as above",
    "tests/semantics/test_long_chains.py::test_chain_values[2.5]": "as above",
    "tests/semantics/test_long_chains.py::test_chain_values[-2.0]": "as above",
    "tests/semantics/test_long_chains.py::test_chain_values[1.0]": "as above",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args1]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args2]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args3]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args4]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args5]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args6]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args7]": "[args0] is fast",
    "tests/test_long_tail.py::test_in_range_with_traced_values[args8]": "[args0] is fast",
    "tests/test_long_tail.py::test_variables_bound_in_an_earlier_iteration[3-": "[0-*], [1-*] are fast",
    "tests/test_long_tail.py::test_a_settling_carry_under_vmap_and_grad": "vmap and grad of it",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[min_default]":
        "max_default is fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[max_key]": "as above",
    "tests/test_vocabulary_tail.py::test_a_zero_step_under_vmap": "vmap of it",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[sum_start]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[sum_start_keyword]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[sum_listcomp]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[sum_of_tests]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[all_gen]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[all_listcomp]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[two_ifs_and_enumerate]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[in_a_loop]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary.py::test_typed_keys_carried[1.0-rbg]": "[1.0-None] is fast",
    "tests/test_gradients.py::test_vector_carry": "a vector carry; the scalar ones are fast",
    "tests/test_gradients.py::test_a_raise_in_a_differentiated_loop":
        "a raise in a loop is fast in tests/test_errors_teach.py",
    "tests/test_lowering.py::test_select_is_differentiated_like_a_cond[0.0]": "[4.0], [-1.0] are fast",
    "tests/test_direct_lowering.py::test_a_loop_compiles_to_the_same_program_whatever_was_traced_before[nested_search]":
        "[search] is fast",
    "tests/semantics/test_loop_exits.py::test_a_one_path_binding_in_an_inner_loop_keeps_its_last_value":
        "test_a_variable_bound_on_one_path_keeps_its_last_value is fast",
    "tests/semantics/test_loop_exits.py::test_hoisted_breaks_match_python":
        "the fixtures break_* are fast",
    "tests/test_cli.py::test_explain_golden[examples/bisection.py:bisect-": "the collatz golden is fast",
    "tests/test_python_effects.py::test_effects_match_python[policy_iteration]": "the small programs are fast",
    "tests/test_python_effects.py::test_effects_match_python[sinkhorn]": "as above",
    "tests/test_vmap_loops.py::test_primitives_are_low_equations": "a structural check of the jaxpr",
    "tests/test_lane_machine.py::test_flat_lanes_give_each_lane_its_eager_result[0.1]": "[0.5] is fast",
    "tests/test_library_wrappers.py::test_equinox_sequential_of_a_user_layer[1]": "[0] is fast",
    "tests/test_library_wrappers.py::test_equinox_sequential_of_a_user_layer[2]": "[0] is fast",
    "tests/test_library_wrappers.py::test_checkpointed_functions_called_from_converted_code[1]":
        "[0] is fast",
    "tests/test_library_wrappers.py::test_module_level_jit_and_checkpoint_called_from_converted_code[1]":
        "[0] is fast",
    # (issue 42's composing tests, after merging main: the fuzzer's 48 programs take
    # about 120 s alone on 2 busy cores; test_compose.py keeps every composition fast)
    "tests/test_fuzz_compose.py::test_every_lane_is_eager_python_under_each_composition":
        "48 random programs in worker processes; the slow tier also runs the long profile",
    "tests/test_compose.py::test_float_programs_gradients[float_elif_while]":
        "[float_elif] is fast",
    "tests/test_compose.py::test_float_programs_gradients[one_path_in_loop]": "as above",
    "tests/test_compose.py::test_float_programs_gradients[loop_with_break_return]": "as above",
    "tests/test_compose.py::test_float_programs_gradients[float_elif]":
        "gradients under compositions: test_gradients.py's are fast",
    "tests/test_compose.py::test_float_programs_values_and_in_axes[float_elif_while]":
        "[float_elif] is fast",
    "tests/test_compose.py::test_float_programs_values_and_in_axes[one_path_in_loop]": "as above",
    "tests/test_compose.py::test_float_programs_values_and_in_axes[loop_with_break_return]":
        "as above",
    "tests/test_compose.py::test_a_print_in_a_branch_holding_a_loop_under_vmap_ends":
        "effects under vmap are fast in test_effects_happen_once_per_lane_and_checks_call_the_host_once",
    "tests/semantics/test_loop_exits.py::test_variables_bound_on_some_paths_are_carried_from_one_trace":
        "test_a_variable_bound_on_one_path_keeps_its_last_value is fast",
    "tests/semantics/test_long_chains.py::test_chain_values[-0.5]": "[0.5] is fast",
    "tests/semantics/test_long_chains.py::test_chain_values[1.5]": "[0.5] is fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[any_gen]":
        "sum_gen, len_listcomp, max_default are fast",
    "tests/test_vocabulary_tail.py::test_filtered_reductions_match_python[nested_fors]": "as above",
    "tests/test_lowering.py::test_select_is_differentiated_like_a_cond[-1.0]": "[4.0] is fast",
    "tests/test_gradients.py::test_forward_mode[range_break]": "[data_while] is fast",
    "tests/test_library_wrappers.py::test_nnx_jit_and_grad_of_a_converted_module[2.0]": "[0.1] is fast",
    "tests/test_python_effects.py::test_a_loop_whose_first_test_python_ran_stages_no_zero_trip_check":
        "a sampler run under vmap of random keys (`while True:` is in the fixtures)",
    # second ways of running a construct (the fast tier keeps the first; issue 44's and
    # 43's tests, measured with --durations after the merges)
    "tests/test_strings.py::test_int_format_specs_give_pythons_characters":
        "test_fstring_and_percent_templates and test_str_repr_bin_oct_hex are fast",
    "tests/test_strings.py::test_digit_programs[digit_sum-": "parse_with_base is fast",
    "tests/test_strings.py::test_digit_programs[armstrong-": "as above",
    "tests/test_strings.py::test_digit_programs[palindrome-": "as above",
    "tests/test_strings.py::test_digit_programs[digital_root-": "as above",
    "tests/test_strings.py::test_digit_programs[binary_ones_and_gap-": "as above",
    "tests/test_strings.py::test_tables_of_a_static_size[grid_paths-": "display_read is fast",
    "tests/test_strings.py::test_tables_of_a_static_size[fib_table-": "as above",
    "tests/test_strings.py::test_tables_of_a_static_size[float_table-": "as above",
    "tests/test_strings.py::test_list_methods_and_math[sort_and_query-": "math_of_integers is fast",
    "tests/test_strings.py::test_bools_and_other_integer_dtypes": "int32 digits are fast",
    "tests/test_compose.py::test_a_print_in_a_static_loop_runs_each_iteration_under_grad[grad_jit]":
        "[grad_vmap] is fast",
    "tests/test_compose.py::test_a_print_in_a_static_loop_runs_each_iteration_under_grad[jit_grad]":
        "as above",
    "tests/test_compose.py::test_float_programs_values_and_in_axes[float_elif]":
        "[float_elif_while] is fast",
    "tests/test_compose.py::test_where_the_probe_fails_too_the_path_goes_with_one_warning":
        "test_a_program_that_fails_to_lower... is fast",
    "tests/semantics/test_weak_carries.py::test_results_have_the_eager_dtypes_under_jit[int-":
        "[float-*] is fast",
    "tests/semantics/test_weak_carries.py::test_results_have_the_eager_dtypes_under_vmap[for_rows]":
        "[while_loop] is fast",
    "tests/semantics/test_weak_carries.py::test_results_have_the_eager_dtypes_under_vmap[nested]":
        "as above",
    "tests/semantics/test_weak_carries.py::test_gradients_have_the_eager_dtype[float16-":
        "[bfloat16-*] is fast",
    "tests/semantics/test_loop_exits.py::test_a_return_value_is_carried_without_tracing_the_body_again":
        "tests/test_trace_counts.py counts traces in the fast tier",
    "tests/semantics/test_loop_exits.py::test_an_input_made_for_a_variable_the_body_binds_otherwise_is_given_up":
        "a second trace path of a variable first bound in a loop",
    "tests/semantics/test_definedness.py::test_a_variable_bound_on_some_paths_of_an_if[other_path_rebinds]":
        "[read_under_the_same_test] is fast",
    "tests/semantics/test_nested_returns.py::test_nested_returns_int_values_concrete[1]": "[0] is fast",
    "tests/test_direct_lowering.py::test_the_gpu_select_computes_what_python_does":
        "the GPU's select form, on the CPU",
    "tests/test_direct_lowering.py::test_a_loop_compiles_to_the_same_program_whatever_was_traced_before[search]":
        "the other program is fast",
    "tests/test_gradients.py::test_reverse_mode_compositions[data_while-grad(convert)]":
        "[data_while-grad(autoflow.jit)] is fast",
    "tests/test_gradients.py::test_reverse_mode_under_vmap[data_while-grad(sum(vmap(autoflow.jit)))]":
        "the other compositions are fast",
    "tests/test_gradients.py::test_checkpoint_prints_in_the_forward_pass_only":
        "test_the_backward_pass_does_not_print_again is fast",
    "tests/test_lane_machine.py::test_flat_lanes_give_each_lane_its_eager_result[0.5]":
        "test_flat_lanes_are_the_nested_programs_values is fast",
    "tests/semantics/test_lanes_auto.py::test_grad_of_a_float_nest_per_lane[compacted]":
        "[auto] is fast; test_a_compacted_nest_per_lane compacts in the fast tier",
    "tests/test_library_wrappers.py::test_converted_functions_under_other_names_pickle_into_a_fresh_process":
        "plain pickle in this process is fast",
    "tests/test_lowering.py::test_gradient_of_a_vmapped_if[scalar_if_in_loop]": "[scalar_if] is fast",
    "tests/test_lowering.py::test_gradient_of_a_vmapped_if[sqrt_or_zero]": "as above",
    # Whole-corpus and fresh-process checks (CI runs them in the slow tier):
    "tests/test_check_agrees.py::test_check_agrees_with_the_first_call":
        "every program of four corpora checked and traced (19 s); "
        "test_the_error_case_table_lists_every_function is fast",
    "tests/test_pytest_plugin.py::test_plugin_golden_update_and_behaviour":
        "pytest processes; tests/test_fixtures.py::test_golden uses the plugin's fixture",
    "tests/test_advice.py::test_each_error_is_followed_by_the_fix_its_message_suggests":
        "every error kind and its fix (7 s); tests/test_check_pitfalls.py is fast",
}
# The long checks: the corpora of the slow tier, of which CI's slow tier runs one item in
# SAMPLED[key] (every k-th in collection order, so each run is the same sample) to keep CI
# within its time. `AUTOFLOW_LONG=1` (or benchmarks/long_checks.sh, which records its
# results in benchmarks/LONG_CHECKS.md) runs all of them.
SAMPLED = {  # (a test id prefix or a file; the first key that matches counts)
    # (first: its sample is its first depth, the fastest; a key's place is its offset)
    "tests/semantics/test_nested_returns.py::test_nested_returns_traced_conditions": 5,
    "tests/test_algorithms.py::test_program_matches_python": 4,
    "tests/test_algorithms.py::test_no_tracer_text_in_outputs": 4,
    # 0: none in CI (each about 70-100 s; what they check has faster tests in the tier:
    # test_checkpoint_around_a_loop, test_nested_returns_traced_conditions[1])
    "tests/test_gradients.py::test_any_checkpoint_budget_gives_the_same_gradient": 0,
    "tests/semantics/test_nested_returns.py::test_return_inside_if_inside_loop": 0,
    "tests/test_gradients.py": 2,  # its slow tests: the second ways of each composition
    "tests/test_peer_styles.py": 2,
    "tests/test_fixtures.py": 2,  # its slow tests: each fixture under grad and vmap
}
# Families of the fast tier sampled there: of the parameters of a test whose id starts
# with a key, one in k (the first, then every k-th) is in the fast tier, the others in
# the slow tier (which CI runs), so the fast tier keeps every kind of case at a third of
# its cost (the fixtures' eager-vs-jit cases: 282 tests, 40 s).
FAST_SAMPLE = {
    "tests/test_fixtures.py::test_eager_vs_jit": 3,
    "tests/test_fixtures.py::test_golden": 3,
    "tests/test_convert_fidelity.py::test_faithful_output_is_the_unparsers_program": 4,
    "tests/test_convert_fidelity.py::test_converting_the_output_again_changes_nothing": 4,
    "tests/test_convert_fidelity.py::test_every_comment_is_kept": 4,
}
# Every other parametrized family: of FAMILY_LEAST or more cases in the fast tier, one
# in FAMILY_SAMPLE (the first, then every other one) stays there, the rest are slow. A
# family's cases are cases of one construct (nine math functions, twelve truth
# conversions): the fast tier keeps the construct and half of its cases, CI runs all.
FAMILY_LEAST, FAMILY_SAMPLE = 3, 2
FAST_WHOLE = (  # families whose every case stays in the fast tier
    "tests/test_jax_paths.py::",  # a fault for every row of JAX's private paths (issue 46)
)
_SAMPLED_OUT: set = set()  # node ids FAST_SAMPLE puts in the slow tier (this session)
LONG = os.environ.get("AUTOFLOW_LONG", "") not in ("", "0")
SIGNAL = {
    "tests/test_errors_teach.py::test_ctrl_c_stops_a_runaway_loop_when_debug_loops_is_set":
        "a real SIGINT to a process running a compiled loop (timing-dependent)",
}
TIERS = ("fast", "slow", "signal", "all")


def pytest_addoption(parser):
    parser.addoption("--tier", choices=TIERS, default="fast",
                     help="which tests to run: fast (default), slow, signal, or all "
                          "(see SLOW in tests/conftest.py)")


def pytest_configure(config):
    config.addinivalue_line("markers", "slow: in the slow tier (pytest --tier slow)")
    config.addinivalue_line("markers", "signal: in the signal tier (pytest --tier signal)")
    if config.getoption("--tier") in ("signal", "all"):
        # the signal test's own switch (it skips itself without it)
        os.environ.setdefault("AUTOFLOW_SIGNAL_TESTS", "1")


def _tier_of(item, used):
    if item.get_closest_marker("signal"):
        return "signal"
    if item.get_closest_marker("slow"):
        return "slow"
    nodeid = item.nodeid if item.nodeid.startswith("tests/") else "tests/" + item.nodeid
    if nodeid in _SAMPLED_OUT:
        return "slow"
    for table, tier in ((SIGNAL, "signal"), (SLOW, "slow")):
        for key in table:
            # a file, a test (every parameter), one parameter, or a parameter prefix ("[a-")
            if nodeid.startswith(key) and (len(nodeid) == len(key) or key[-1] in "[-"
                                           or nodeid[len(key)] in "[:"):
                used.add(key)
                return tier
    return "fast"


def pytest_collection_modifyitems(config, items):
    tier = config.getoption("--tier")
    used, keep, drop = set(), [], []
    seen = {}
    for item in items:
        nodeid = item.nodeid if item.nodeid.startswith("tests/") else "tests/" + item.nodeid
        key = next((k for k in FAST_SAMPLE if nodeid.startswith(k + "[")), None)
        if key is not None:
            n = seen[key] = seen.get(key, -1) + 1
            if n % FAST_SAMPLE[key]:
                _SAMPLED_OUT.add(nodeid)
    # Every other family of FAMILY_LEAST or more fast cases: one in FAMILY_SAMPLE.
    families: dict = {}
    for item in items:
        nodeid = item.nodeid if item.nodeid.startswith("tests/") else "tests/" + item.nodeid
        if "[" in nodeid and _tier_of(item, set()) == "fast":
            key = nodeid.split("[", 1)[0]
            if key not in FAST_SAMPLE and not any(key.startswith(k) for k in FAST_WHOLE):
                families.setdefault(key, []).append(nodeid)
    for ids in families.values():
        if len(ids) >= FAMILY_LEAST:
            _SAMPLED_OUT.update(i for n, i in enumerate(ids) if n % FAMILY_SAMPLE)
    for item in items:
        t = _tier_of(item, used)
        (keep if tier in ("all", t) else drop).append(item)
    # Only a run over the whole suite can tell that an entry matches nothing.
    whole = [str(a) for a in config.args] in ([], [str(config.rootpath / "tests")], ["tests"])
    stale = sorted((set(SLOW) | set(SIGNAL)) - used) if whole and not config.option.keyword \
        and not config.option.markexpr and not config.getoption("ignore") else []
    if stale:
        raise pytest.UsageError("tests/conftest.py: tier entries that match no test: "
                                + ", ".join(stale))
    if not LONG:
        # (the sample differs between the two tests of one corpus: `offset`)
        seen, sampled = {}, []
        for item in keep:
            key = next((k for k in SAMPLED if item.nodeid.startswith(k)), None)
            if key is not None and _tier_of(item, set()) == "slow" and item.nodeid not in \
                    _SAMPLED_OUT and "tests/" + item.nodeid not in _SAMPLED_OUT:
                n = seen[key] = seen.get(key, -1) + 1
                offset = list(SAMPLED).index(key)
                if not SAMPLED[key] or (n + offset) % SAMPLED[key]:
                    sampled.append(item)
        if sampled:
            ids = {id(i) for i in sampled}
            keep = [i for i in keep if id(i) not in ids]
            drop += sampled
            config._autoflow_long = len(sampled)
    if drop:
        config.hook.pytest_deselected(items=drop)
        items[:] = keep
    counts = {}
    for item in drop:
        t = _tier_of(item, set())
        counts[t] = counts.get(t, 0) + 1
    long = getattr(config, "_autoflow_long", 0)
    if long:
        counts["slow"] -= long
        if not counts["slow"]:
            del counts["slow"]
    config._autoflow_tiers = (tier, len(keep), counts)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_auto_num_workers(config):
    """Workers for ``-n auto`` (pyproject.toml's addopts): the whole fast tier (``pytest
    -q``, the README's command) in two processes, or ``PYTEST_XDIST_AUTO_NUM_WORKERS``
    of them (measured on 2 cores with one busy: 267-289 s against 410 s in one process,
    CPU time 425 s against 362 s); a file, a test or another tier in one (``0``: no
    workers; starting them costs more than it saves)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return int(os.environ["PYTEST_XDIST_AUTO_NUM_WORKERS"])
    source = getattr(pytest.Config, "ArgsSource", None)  # (pytest 7.4 on)
    whole = (source is not None and config.args_source == source.TESTPATHS) or \
        [str(a) for a in config.args] in ([], ["tests"], [str(config.rootpath / "tests")])
    if config.getoption("--tier") != "fast" or not whole or config.option.keyword \
            or config.option.markexpr:
        return 0
    return min(2, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity")
               else os.cpu_count() or 1)


def pytest_sessionfinish(session):
    """A worker of pytest-xdist hands its tier counts to the controller, which prints
    the summary line (the controller collects nothing itself)."""
    out = getattr(session.config, "workeroutput", None)
    ran = getattr(session.config, "_autoflow_tiers", None)
    if out is not None and ran is not None:
        out["autoflow_tiers"] = ran
        out["autoflow_long"] = getattr(session.config, "_autoflow_long", 0)


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node, error):
    got = getattr(node, "workeroutput", {})
    if "autoflow_tiers" in got:
        node.config._autoflow_tiers = tuple(got["autoflow_tiers"])
        node.config._autoflow_long = got["autoflow_long"]


def pytest_terminal_summary(terminalreporter, exitstatus, config):
    """One line, even with ``-q``: the tier that ran, and how to run the tests it left out
    (pytest's own summary counts them as "deselected")."""
    ran = getattr(config, "_autoflow_tiers", None)
    if ran is None:
        return
    tier, kept, counts = ran
    if not counts:
        return
    rest = ", ".join(f"{n} in the {t} tier (--tier {t})" for t, n in sorted(counts.items()))
    long = getattr(config, "_autoflow_long", 0)
    if long:
        rest += f", {long} long checks (AUTOFLOW_LONG=1)"
    terminalreporter.write_line(
        f"autoflow: ran the {tier} tier ({kept} tests); not run here: {rest}; "
        f"everything: --tier all (the table: SLOW in tests/conftest.py)")


def pytest_report_header(config):
    tier = config.getoption("--tier")
    more = "" if tier == "all" else " (other tiers: --tier slow, --tier signal, --tier all)"
    return f"autoflow test tier: {tier}{more}"
