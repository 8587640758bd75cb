"""The guest features' traits (gantt.compute.feature_traits) where they meet the rest of the request: the root
provider's traits Nova adds after ``isolate_aggregates`` has run, so an aggregate isolated for a feature's trait
takes a request only when it asks for that trait itself (``trait:`` extra spec), as in Nova; the vTPM's model and
version are the request group's, which it does count; a rebuild runs no request filter."""

from __future__ import annotations

from tests.conftest import make_scheduler, passing, request

SOUND = {"hw:sound_model": "virtio"}
VTPM = {"hw:tpm_version": "2.0"}
ALL = ["COMPUTE_SOUND_MODEL_VIRTIO", "COMPUTE_SECURITY_TPM_2_0", "COMPUTE_SECURITY_TPM_TIS",
       "COMPUTE_SECURITY_TPM_SECRET_SECURITY_USER"]


def _cloud(**scheduler: object):  # type: ignore[no-untyped-def]
    sched = make_scheduler({"isolated": {"traits": ALL}, "open": {"traits": ALL}, "bare": {"traits": []}},
                           filters=["ComputeFilter"], scheduler=dict(scheduler))
    sched.update_aggregate({"id": 1, "hosts": ["isolated"],
                            "metadata": {"trait:COMPUTE_SOUND_MODEL_VIRTIO": "required",
                                         "trait:COMPUTE_SECURITY_TPM_2_0": "required"}})
    return sched


def test_features_require_their_traits() -> None:
    sched = _cloud()
    assert passing(sched, request(extra_specs=SOUND)) == {"isolated", "open"}
    assert passing(sched, request(extra_specs=VTPM)) == {"isolated", "open"}
    assert passing(sched, request()) == {"isolated", "open", "bare"}


def test_an_isolated_aggregate_does_not_count_a_features_root_trait_as_asked_for() -> None:
    sched = _cloud(enable_isolated_aggregate_filtering=True)
    # The aggregate also isolates the vTPM's version trait, which a sound card request does not ask for.
    assert passing(sched, request(extra_specs=SOUND)) == {"open"}
    both = {**SOUND, **VTPM, "trait:COMPUTE_SOUND_MODEL_VIRTIO": "required"}
    assert passing(sched, request(extra_specs=both)) == {"isolated", "open"}
    # COMPUTE_SOUND_MODEL_VIRTIO is only the root provider's here: Nova's isolate_aggregates did not see it
    assert passing(sched, request(extra_specs={**SOUND, **VTPM})) == {"open"}


def test_a_rebuild_runs_no_request_filter() -> None:
    sched = make_scheduler({"bare": {"traits": []}}, filters=["ComputeFilter"])
    rebuild = request(extra_specs={**SOUND, "hw:tpm_version": "2.0", "hw:tpm_secret_security": "nobody"},
                      force_nodes=["bare"], scheduler_hints={"_nova_check_type": ["rebuild"]})
    assert passing(sched, rebuild) == {"bare"}
