"""The one-shot suite again, on a deployment whose one-shot episodes each get a fresh
container (`PROCTOR_ISOLATION=container`; the default is pooled): the same rewards and
verdicts for the same episodes (HumanEval's 164 canonical and broken solutions, abuse,
early exits, exhausted resources, the grading defences against cheats and their honest
look-alikes), each episode's sandbox reported as a container.

The tests are the default mode's own, imported: pytest runs them here with this module's
`service_url`, a service whose workers serve one-shot episodes from fresh containers.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import claimed_database, running_service
from tests.e2e.helpers import episode, run
from tests.e2e.test_assert_grading import (  # noqa: F401
    test_a_correct_solution_passes,
    test_a_wrong_solution_fails,
    test_ending_the_run_before_the_last_assertion_fails,
    test_stdin_stdout_cases,
)
from tests.e2e.test_compile_cache import (  # noqa: F401
    test_a_program_that_replaces_itself_does_not_poison_the_next_episode,
    test_identical_code_compiles_once_and_each_case_reuses_it,
)
from tests.e2e.test_grading import (  # noqa: F401
    ADD,
    test_correct_solution_earns_reward_one,
    test_exit_zero_at_import_does_not_pass,
    test_fork_bomb_is_contained,
    test_gradual_memory_growth_is_oom,
    test_infinite_loop_times_out,
    test_memory_bomb_is_oom,
    test_network_is_unreachable,
    test_output_flood_is_truncated,
    test_partial_scoring_pays_the_fraction,
    test_planted_conftest_does_not_force_a_pass,
    test_planted_report_does_not_count,
    test_syntax_error_is_a_compile_error,
    test_writes_outside_the_workspace_fail,
    test_wrong_solution_earns_zero,
)
from tests.e2e.test_grading_defences import (  # noqa: F401
    test_a_cheat_under_test_is_caught_by_the_grader,
    test_a_patched_test_framework_is_caught,
    test_an_honest_lookalike_keeps_its_reward,
    test_the_tests_own_helpers_and_patches_are_not_evidence,
)
from tests.e2e.test_hostile_debris import (  # noqa: F401
    test_a_deep_tree_made_while_the_tests_run_is_cleaned_up,
    test_a_hostile_completion_record_fails_the_run,
    test_a_hostile_junit_report_fails_the_run,
    test_a_tree_thousands_of_levels_deep_is_graded,
    test_megabytes_of_control_characters_and_invalid_utf8,
    test_one_megabyte_of_control_characters_under_default_limits,
)
from tests.e2e.test_humaneval import test_canonical_solutions_pass_and_broken_ones_fail  # noqa: F401
from tests.e2e.test_resource_exhaustion import (  # noqa: F401
    test_oneshot_forking_leftover_is_graded,
    test_oneshot_honest_background_process_still_passes,
    test_oneshot_killing_every_process_it_may_reaches_only_its_own,
    test_oneshot_many_empty_files,
    test_oneshot_tmpfs_filled_to_the_memory_limit,
)


@pytest.fixture(scope="module")
def service_url(docker_ready: None, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    # a Redis database of its own: the session's service would take these episodes
    log = tmp_path_factory.mktemp("container") / "service.log"
    with (
        claimed_database() as redis_url,
        running_service(redis_url, log, PROCTOR_ISOLATION="container") as url,
    ):
        yield url


def test_episodes_run_in_a_container_of_their_own(http: httpx.Client) -> None:
    result = run(http, episode(ADD))
    assert (result["verdict"], result["sandbox"]["isolation"]) == ("passed", "container")
