"""Shared test fixtures."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

# Tests never touch the network.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_DISABLE_TELEMETRY", "1")

REPO_ROOT = Path(__file__).resolve().parents[1]
SHARED_DATA = REPO_ROOT.parent / "shared" / "data"


@pytest.fixture(scope="session")
def shared_data() -> Path:
    """The development data folder ``../shared/data``; tests that need it skip where it is absent."""
    if not SHARED_DATA.is_dir():
        pytest.skip(f"development data not found at {SHARED_DATA}")
    return SHARED_DATA


@pytest.fixture
def refuse_to_open(monkeypatch):
    """``refuse_to_open(name)``: from then on, ``os.open`` of a file called ``name`` fails as it does on a file system
    that will not make it (``/proc``), whoever calls it (``pathlib``, ``filelock``)."""
    real_open = os.open

    def refuse(name: str) -> None:
        def open_(path, *args, **kwargs):
            if os.path.basename(os.fspath(path)) == name:
                raise FileNotFoundError(2, "No such file or directory", os.fspath(path))
            return real_open(path, *args, **kwargs)

        monkeypatch.setattr(os, "open", open_)

    return refuse


# The reliability suite (`pytest -m reliability`): the tests that keep a hostile user's cases handled - each a clear
# error, a correct result, or no harm done. One table, by category, and membership is explicit: each entry is
# "test_file.py::test_function" (every parameter of it counts as a case), so a same-named test elsewhere is not
# counted. README.md states how many cases each category holds (tests/test_reliability_suite.py keeps that line equal
# to what pytest collects).
RELIABILITY = {
    "bad configs": [
        "test_data.py::test_collator_settings_that_noise_nothing_sensible_are_refused",
        "test_training.py::test_what_torch_and_the_trainer_refuse_clearly_is_theirs",
        "test_configuration_scratchformer.py::test_invalid_values_raise_a_value_error_naming_field_value_and_rule",
        "test_configuration_scratchformer.py::test_values_given_under_their_hugging_face_alias_are_checked_too",
        "test_configuration_scratchformer.py::test_flags_must_be_booleans_not_strings",
        "test_configuration_scratchformer.py::test_a_string_boolean_in_config_json_is_refused_not_read_as_true",
        "test_configuration_scratchformer.py::test_an_assigned_value_is_checked_when_a_model_is_built_from_the_config",
        "test_configuration_scratchformer.py::test_update_checks_the_values_together_and_is_all_or_nothing",
        "test_configuration_scratchformer.py::test_a_folder_without_config_json_is_an_error_not_the_defaults",
        "test_configuration_scratchformer.py::test_a_saved_invalid_config_fails_on_load",
        "test_hub.py::test_installed_package_refuses_a_newer_format_naming_config_json",
        "test_configuration_scratchformer.py::test_an_alias_beside_its_field_with_another_value_is_refused",
        "test_configuration_scratchformer.py::test_an_unknown_key_is_warned_about_naming_the_closest_field",
        "test_loading.py::test_a_config_that_contradicts_its_weights_names_the_field_and_both_sizes",
    ],
    "ids, masks and model inputs": [
        "test_modeling_scratchformer.py::test_bad_inputs_raise_value_errors",
        "test_modeling_scratchformer.py::test_bad_decoder_inputs_and_labels_raise_value_errors",
        "test_tokenizer_cli.py::test_a_negative_min_frequency_is_refused_by_both_trainers",
        "test_bpe.py::test_one_string_is_refused_as_a_corpus_by_both_trainers",
        "test_bpe.py::test_reference_decode_refuses_what_is_not_a_token_id",
        "test_embeddings.py::test_public_pooling_and_cosine_leave_bad_types_and_sizes_to_torch",
        "test_tokenization_scratchformer.py::test_the_conversions_and_trainers_refuse_what_they_cannot_read",
        "test_compare.py::test_one_model_name_alone_is_one_model_in_every_study",
        "test_modeling_scratchformer.py::test_all_labels_ignored_gives_a_zero_loss_not_nan",
        "test_training_reliability.py::test_a_training_batch_without_labels_gives_zero_as_the_model_does",
        "test_modeling_scratchformer.py::test_a_mask_that_is_not_zeros_and_ones_is_refused",
        "test_modeling_scratchformer.py::test_a_fully_padded_row_gives_finite_numbers",
        "test_modeling_scratchformer.py::test_static_cache_step_refuses_a_mask_of_the_wrong_size",
        "test_tokenization_scratchformer.py::test_ids_and_lengths_that_make_no_sense_are_refused_not_dropped",
        "test_bpe.py::test_encode_rejects_bad_input_clearly",
        "test_tokenization_scratchformer.py::test_bad_input_gets_a_clear_error",
        "test_tokenization_scratchformer.py::test_fast_training_errors",
        "test_modeling_scratchformer.py::test_generate_settings_past_the_models_sizes_are_refused_before_any_work",
        "test_modeling_scratchformer.py::test_generating_past_learned_positions_is_refused_up_front",
        "test_modeling_scratchformer.py::test_embeddings_of_another_dtype_and_ids_without_values_are_refused",
        "test_modeling_scratchformer.py::test_ids_of_another_dtype_get_torchs_error_naming_the_dtypes_it_takes",
        "test_heads.py::test_labels_outside_the_classes_and_no_labels_at_all_are_refused",
        "test_heads.py::test_masked_lm_labels_outside_the_vocabulary_or_of_the_wrong_shape_are_refused",
        "test_heads.py::test_sequence_labels_of_the_wrong_shape_or_not_finite_are_refused",
    ],
    "files and TSVs": [
        "test_data.py::test_bad_files_are_clear_errors",
        "test_senses.py::test_bad_tsv",
        "test_senses.py::test_missing_file",
        "test_senses.py::test_cli_bad_data_is_a_clear_error",
        "test_senses.py::test_pairs_of_one_kind_only_are_refused",
        "test_tokenizer_cli.py::test_bad_files_give_a_clear_error",
        "test_hub.py::test_loading_a_broken_folder_names_the_file",
        "test_hub.py::test_check_folder_names_each_defect",
        "test_training.py::test_empty_data_is_a_clear_error",
        "test_training.py::test_missing_data_file_is_one_line",
        "test_loading.py::test_a_folder_without_config_is_a_clear_error",
        "test_loading.py::test_a_name_that_is_nothing_is_a_clear_error",
        "test_hub.py::test_bad_scores_are_refused_naming_the_field",
        "test_hub.py::test_damaged_weights_are_named_by_load_compare_export_and_check_folder",
        "test_loading.py::test_checksums_are_sha256sum_lines_and_only_damage_counts",
        "test_loading.py::test_save_pretrained_refuses_a_file_and_gives_the_weights_the_umask_mode",
        "test_loading.py::test_checksums_cover_config_json_and_an_older_manifest_without_it_still_loads",
        "test_hub.py::test_a_manifest_that_lists_no_weights_file_is_a_problem_not_a_pass",
        "test_hub.py::test_the_manifest_covers_the_tokenizer_and_an_older_manifest_without_it_still_verifies",
        "test_storage.py::test_a_loop_fifo_socket_or_device_where_a_file_is_read_is_one_line_in_every_command",
        "test_storage.py::test_a_folder_where_a_result_file_goes_is_one_line_and_stays",
        "test_training_reliability.py::test_rows_missing_a_column_are_refused_with_their_line_numbers",
        "test_modeling_scratchformer.py::test_weights_that_are_not_floats_are_refused_in_one_line",
        "test_hub.py::test_check_folder_names_weights_that_are_not_floats",
    ],
    "one line and exit 2 for every mistake": [
        "test_cli.py::test_a_user_mistake_is_one_line_and_exit_2",
        "test_cli.py::test_an_empty_path_is_one_line_and_nothing_is_written_in_the_working_folder",
        "test_compare.py::test_cli_mistakes_end_with_one_error_line",
        "test_senses.py::test_cli_mistakes_end_with_one_error_line",
        "test_senses.py::test_cli_error_in_a_subprocess_has_no_traceback",
        "test_training.py::test_bad_option_fails_fast_with_one_line",
        "test_packaging.py::test_a_training_command_without_its_extra_is_one_line",
        "test_training_reliability.py::test_missing_sacrebleu_is_found_before_data",
        "test_compare.py::test_a_run_that_fails_leaves_no_empty_output_folder",
        "test_loading.py::test_a_folder_or_file_this_user_may_not_read_is_one_line_naming_path_and_user",
        "test_hub.py::test_a_symlink_loop_is_one_line_for_export_as_for_compare",
        "test_hub.py::test_an_export_into_a_folder_name_that_is_not_utf8_or_250_bytes_long_works",
        "test_storage.py::test_library_reports_of_a_full_disk_are_recognised_and_said_in_one_line",
        "test_cli.py::test_output_to_a_pipe_closed_by_its_reader_is_discarded_without_a_traceback",
        "test_training_reliability.py::test_every_option_mistake_is_one_line_before_any_data",
        "test_training_reliability.py::test_a_model_and_a_tokenizer_of_other_vocabularies_are_refused_before_training",
        "test_training_reliability.py::test_a_model_or_batch_that_cannot_train_is_one_line_before_training",
        "test_training_reliability.py::test_a_diverging_run_ends_in_one_line_unless_told_to_train_on",
        "test_training_reliability.py::test_a_non_finite_loss_stops_the_run_at_its_step_and_keeps_the_good_checkpoints",
        "test_training_reliability.py::test_a_model_whose_final_evaluation_is_nan_is_not_published",
        "test_package_checkpoint.py::test_a_run_whose_evaluation_or_weights_are_not_finite_is_not_packaged",
        "test_tokenizer_cli.py::test_a_models_folder_is_never_given_another_tokenizer",
        "test_tokenizer_cli.py::test_an_output_that_is_a_loop_of_symbolic_links_is_refused_before_training",
        "test_training_reliability.py::test_a_named_pipe_in_a_model_or_tokenizer_folder_is_one_line_not_a_hang",
        "test_hub.py::test_an_export_whose_weights_overflow_the_dtype_is_refused_naming_the_tensor",
    ],
    "kills, locks and concurrent runs": [
        "test_training_reliability.py::test_killed_saves_resume_to_the_uninterrupted_weights",
        "test_training_reliability.py::test_incomplete_checkpoints_are_found",
        "test_training_reliability.py::test_rotation_keeps_complete_checkpoints_only",
        "test_training_reliability.py::test_output_lock",
        "test_training_reliability.py::test_second_run_on_a_locked_folder_is_refused",
        "test_training_reliability.py::test_finished_model_folder_is_refused_without_flags",
        "test_training_reliability.py::test_resume_refuses_options_that_change_the_run",
        "test_training_reliability.py::test_resume_of_a_run_recorded_before_an_option_existed_allows_only_its_default",
        "test_training_reliability.py::test_resume_with_the_contrastive_loss_keeps_the_micro_batch",
        "test_training_reliability.py::test_a_checkpoint_whose_pickles_torch_refuses_is_skipped_on_resume",
        "test_training_reliability.py::test_a_checkpoint_that_fails_its_checksums_is_skipped_on_resume_and_never_signed_again",
        "test_training_reliability.py::test_a_folder_where_the_lock_file_goes_is_one_line",
        "test_training_reliability.py::test_resume_with_max_steps_below_its_checkpoint_is_refused",
        "test_training_reliability.py::test_two_processes_stop_together_at_a_non_finite_loss",
        "test_hub.py::test_two_exports_started_together_never_mix_their_files",
        "test_hub.py::test_sigterm_during_an_export_removes_its_staging_folder",
        "test_hub.py::test_sigterm_during_a_push_removes_its_staged_export",
        "test_storage.py::test_ctrl_c_during_a_checkpoint_save_leaves_no_staging_folder",
        "test_training_reliability.py::test_sigterm_during_a_checkpoint_save_ends_the_run_as_ctrl_c_does",
        "test_tokenizer_cli.py::test_sighup_while_saving_ends_the_command_and_leaves_no_staging_folder",
        "test_training_reliability.py::test_a_lock_file_that_cannot_be_made_is_said_as_such_not_as_another_run",
    ],
    "no code run unasked": [
        "test_loading.py::test_a_scratchformer_folder_never_runs_its_own_code",
        "test_training_reliability.py::test_booby_trapped_model_and_tokenizer_folders_never_run",
        "test_loading.py::test_compare_and_senses_never_run_a_model_folders_code",
        "test_training_reliability.py::test_foreign_remote_code_needs_trust_remote_code",
        "test_loading.py::test_saved_auto_map_is_ours_only",
        "test_hub.py::test_export_writes_only_our_auto_map_whatever_the_source_config_carried",
        "test_pipelines.py::test_the_silent_tokenizer_path_loads_our_ids_with_no_prompt_no_warning_and_no_code",
    ],
    "path traversal and overwriting": [
        "test_hub.py::test_push_refuses_a_bad_repo_id_before_touching_any_file",
        "test_hub.py::test_cli_refuses_a_bad_repo_id_with_exit_2",
        "test_hub.py::test_export_never_writes_into_or_over_its_source",
        "test_hub.py::test_overwrite_refuses_what_is_not_an_earlier_export",
        "test_tokenizer_cli.py::test_output_that_is_a_file_or_holds_a_tokenizer_is_refused_before_training",
        "test_storage.py::test_an_output_dir_that_is_holds_or_lies_inside_an_input_is_refused_before_anything_is_deleted",
        "test_storage.py::test_analysis_commands_never_write_into_a_model_folder_or_over_their_data",
        "test_storage.py::test_train_tokenizer_never_saves_over_its_training_file",
        "test_storage.py::test_a_replaced_file_is_whole_or_untouched_and_gets_the_permissions_of_a_plain_write",
        "test_tokenization_scratchformer.py::test_save_pretrained_over_an_earlier_save_is_whole_or_untouched",
    ],
    "full disks and permissions": [
        "test_storage.py::test_a_full_disk_in_compare_keeps_the_earlier_results_and_is_one_line",
        "test_storage.py::test_a_full_disk_in_senses_keeps_the_earlier_results_and_is_one_line",
        "test_storage.py::test_train_tokenizer_overwrite_on_a_full_disk_keeps_the_earlier_tokenizer",
        "test_storage.py::test_save_pretrained_on_a_full_disk_keeps_the_earlier_save",
        "test_storage.py::test_tokenizer_save_pretrained_on_a_full_disk_keeps_the_earlier_save",
        "test_storage.py::test_config_save_pretrained_on_a_full_disk_keeps_the_earlier_config",
        "test_storage.py::test_a_full_disk_in_export_is_one_line_and_keeps_the_earlier_export",
        "test_storage.py::test_a_full_disk_at_the_first_save_of_a_run_is_one_line",
        "test_storage.py::test_a_full_disk_at_a_later_checkpoint_keeps_the_earlier_ones_and_is_one_error",
        "test_storage.py::test_unreadable_data_and_unwritable_output_folders_are_one_line_for_another_user",
        "test_storage.py::test_a_read_only_file_system_and_a_disk_without_inodes_are_named_as_such",
    ],
    "bounded memory and time": [
        "test_data.py::test_text_infilling_refuses_noise_that_means_nothing_or_never_ends",
        "test_data.py::test_a_hub_dataset_served_one_byte_at_a_time_is_given_up_at_its_total_time_limit",
        "test_bpe.py::test_training_pieces_cut_only_long_words_and_lose_nothing",
        "test_hub.py::test_push_to_a_hub_that_never_answers_ends_in_one_line_within_a_minute",
        "test_hub.py::test_a_push_whose_retries_outlast_its_time_limit_ends_in_one_line_and_logs_no_secret",
        "test_hub.py::test_push_to_a_hub_that_answers_one_byte_at_a_time_ends_within_its_time_limit",
        "test_loading.py::test_a_hub_that_answers_one_byte_at_a_time_is_given_up_after_the_timeout",
        "test_loading.py::test_a_hub_id_that_downloads_one_byte_at_a_time_ends_within_its_time_limit",
        "test_tokenizer_cli.py::test_a_vocabulary_the_trainer_cannot_hold_is_refused_before_the_data_is_read",
        "test_senses.py::test_a_lemma_past_the_occurrence_cap_is_scored_on_a_stated_seeded_sample",
    ],
    "no secret in any output": [
        "test_loading.py::test_redact_removes_tokens_passwords_and_authorization_values",
        "test_hub.py::test_push_never_prints_a_secret_a_server_echoes_or_an_endpoint_carries",
        "test_loading.py::test_an_unreachable_hub_is_named_without_the_credentials_of_its_endpoint",
        "test_loading.py::test_load_from_the_hub_leaves_no_secret_in_any_exception_or_file",
        "test_errors.py::test_scrub_redacts_every_exception_of_the_chain_and_cuts_what_it_cannot",
        "test_errors.py::test_no_secrets_redacts_the_hub_logs_and_what_leaves_the_block",
        "test_hub.py::test_a_refused_push_chains_no_secret_and_writes_none",
        "test_training_reliability.py::test_train_with_a_hub_token_writes_it_into_no_file_and_still_pushes",
        "test_training_reliability.py::test_a_training_push_the_hub_refuses_shows_no_token_in_its_error_or_logs",
        "test_data.py::test_a_hub_dataset_that_fails_leaves_no_secret_in_the_error_or_what_it_chains",
    ],
}
RELIABILITY_CATEGORY = {name: category for category, names in RELIABILITY.items() for name in names}


def pytest_configure(config):
    config.addinivalue_line("markers", "reliability(category): a hostile-input case of the reliability suite")


# the node ids of the reliability cases this session collected, before -k or -m deselect any: with the whole suite
# collected, test_reliability_suite.py counts them here instead of collecting the suite again in a subprocess
RELIABILITY_COLLECTED: list[str] = []


def reliability_key(nodeid: str) -> str:
    """``tests/test_x.py::test_name[case]`` -> ``test_x.py::test_name``: a case's entry in :data:`RELIABILITY`."""
    path, _, name = nodeid.partition("::")
    return f"{Path(path).name}::{name.split('[', 1)[0].rsplit('::', 1)[-1]}"


def pytest_collection_modifyitems(config, items):
    for item in items:
        category = RELIABILITY_CATEGORY.get(reliability_key(item.nodeid))
        if category:
            item.add_marker(pytest.mark.reliability(category))
            RELIABILITY_COLLECTED.append(item.nodeid)
