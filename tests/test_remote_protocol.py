"""The state server's protocol: control validation in the contract's order with its exact messages,
and the checks a client makes on a received state."""

import math

import pytest

from lab.remote.protocol import ControlRejected, check_state, fmt_num, order, validate_control

ELBOW = "motor_left_elbow"


@pytest.fixture(scope="module")
def validate(robot):
    m = robot.model
    ranges = [tuple(m.actuator_ctrlrange[a]) for a in range(m.nu)]

    def run(body, allowed=(ELBOW,)):
        return validate_control(body, robot.actuator_names, ranges, allowed)

    return run


def rejected(validate, body, allowed=(ELBOW,)) -> ControlRejected:
    with pytest.raises(ControlRejected) as info:
        validate(body, allowed)
    assert info.value.status == 400
    return info.value


def test_valid_command_is_accepted_with_the_model_range(validate):
    req = validate({"actuator": ELBOW, "value": 2.0, "duration_s": 0.25})
    assert (req.actuator, req.value, req.duration_s, req.ctrlrange) == (ELBOW, 2.0, 0.25, (-22.0, 22.0))
    assert req.index == 16


def test_value_outside_ctrlrange_is_rejected_with_the_exact_message(validate):
    err = rejected(validate, {"actuator": ELBOW, "value": 23.0, "duration_s": 0.25})
    assert err.message == "value 23 is outside model ctrlrange [-22, 22]"
    assert err.to_dict()["status"] == "rejected"


def test_value_outside_demo_limit_is_rejected(validate):
    err = rejected(validate, {"actuator": ELBOW, "value": 3.0, "duration_s": 0.1})
    assert err.message == "value 3 is outside demo limit [-2, 2]"
    assert rejected(validate, {"actuator": ELBOW, "value": -2.5, "duration_s": 0.1}).message.startswith("value -2.5 ")


@pytest.mark.parametrize(
    ("value", "message"),
    [
        (math.nan, "value nan is not a finite number"),
        (math.inf, "value inf is not a finite number"),
        (-math.inf, "value -inf is not a finite number"),
        ("2.0", "value must be a number, got string '2.0'"),
        (True, "value must be a number, got boolean"),
        (None, "value must be a number, got null"),
        ([2.0], "value must be a number, got array"),
    ],
)
def test_value_that_is_not_a_finite_number_is_rejected(validate, value, message):
    assert rejected(validate, {"actuator": ELBOW, "value": value, "duration_s": 0.1}).message == message


def test_an_integer_too_big_for_a_float_is_outside_the_ctrlrange(validate):
    err = rejected(validate, {"actuator": ELBOW, "value": 10**400, "duration_s": 0.1})
    assert err.message == "value 100000... (401 digits) is outside model ctrlrange [-22, 22]"


def test_unknown_and_disallowed_actuators_are_rejected(validate):
    assert rejected(validate, {"actuator": "motor_tail", "value": 1, "duration_s": 0.1}).message == (
        "unknown actuator 'motor_tail'"
    )
    err = rejected(validate, {"actuator": "motor_right_knee", "value": 1, "duration_s": 0.1})
    assert err.message == "actuator 'motor_right_knee' is not allowed"
    assert err.hint == "allowed: motor_left_elbow"


@pytest.mark.parametrize(
    ("duration", "message"),
    [
        (5, "duration_s 5 is outside (0, 0.25]"),
        (0, "duration_s 0 is outside (0, 0.25]"),
        (-0.1, "duration_s -0.1 is outside (0, 0.25]"),
        (0.2500001, "duration_s 0.2500001 is outside (0, 0.25]"),
        (math.nan, "duration_s nan is not a finite number"),
        ("0.1", "duration_s must be a number, got string '0.1'"),
    ],
)
def test_duration_outside_zero_to_a_quarter_second_is_rejected(validate, duration, message):
    assert rejected(validate, {"actuator": ELBOW, "value": 1.0, "duration_s": duration}).message == message


def test_checks_run_in_the_contract_order(validate):
    # actuator before value, finite before ctrlrange, ctrlrange before demo limit, value before duration
    assert rejected(validate, {"actuator": "x", "value": math.nan, "duration_s": 9}).message == "unknown actuator 'x'"
    assert rejected(validate, {"actuator": ELBOW, "value": math.nan, "duration_s": 9}).message.startswith("value nan")
    assert rejected(validate, {"actuator": ELBOW, "value": 23, "duration_s": 9}).message.startswith(
        "value 23 is outside model"
    )
    assert rejected(validate, {"actuator": ELBOW, "value": 3, "duration_s": 9}).message.startswith(
        "value 3 is outside demo"
    )


def test_malformed_bodies_are_rejected_with_what_was_expected(validate):
    assert rejected(validate, [1, 2]).message == "control body must be a JSON object, got array"
    assert rejected(validate, "hi").message == "control body must be a JSON object, got string 'hi'"
    assert rejected(validate, {"value": 1, "duration_s": 0.1}).message == "missing field 'actuator'"
    assert rejected(validate, {"actuator": ELBOW, "duration_s": 0.1}).message == "missing field 'value'"
    assert rejected(validate, {"actuator": ELBOW, "value": 1}).message == "missing field 'duration_s'"
    err = rejected(validate, {"actuator": ELBOW, "value": 1, "duration_s": 0.1, "force": 1})
    assert err.message == "unknown field 'force' in control body"
    assert rejected(validate, {"actuator": 16, "value": 1, "duration_s": 0.1}).message == (
        "actuator must be a string, got number"
    )


def test_numbers_are_written_the_way_a_person_writes_them():
    assert [fmt_num(x) for x in (23.0, -22.0, 0.25, 2.0000001, 3, math.nan, 1e300)] == [
        "23",
        "-22",
        "0.25",
        "2.0000001",
        "3",
        "nan",
        "1e+300",
    ]


def _state(robot, seq=1, instance="a" * 32, t=0.1, **over):
    s = {
        "type": "state",
        "sequence": seq,
        "simulation_time": t,
        "server_instance_id": instance,
        "model": robot.identity_dict(),
        "qpos": robot.init_qpos.tolist(),
        "qvel": [0.0] * robot.model.nv,
        "active_control": None,
    }
    s.update(over)
    return s


def test_a_good_state_passes_the_client_checks(robot):
    assert check_state(_state(robot), robot.identity, robot.model.nq, robot.model.nv).ok


def test_a_state_of_another_model_is_a_mismatch_with_the_reason(robot):
    other = dict(robot.identity_dict(), sha256="f" * 64, short="f" * 12)
    check = check_state(_state(robot, model=other), robot.identity, robot.model.nq, robot.model.nv)
    assert not check.ok and check.mismatch
    assert check.reason == f"model identity ffffffffffff (q1.urdf, nq=29) differs from the local model {robot.short_id}"


def test_a_state_with_wrong_array_lengths_or_fields_is_refused(robot):
    nq, nv = robot.model.nq, robot.model.nv
    assert check_state(_state(robot, qpos=[0.0] * 7), None, nq, nv).reason == "qpos has 7 values, expected 29"
    assert check_state(_state(robot, qvel="x"), None, nq, nv).reason == "qvel has string values, expected 28"
    bad = _state(robot)
    del bad["sequence"]
    assert check_state(bad).reason == "state lacks field(s): sequence"
    assert check_state([1]).reason == "state is not a JSON object (array)"


def test_order_tells_advance_repeat_backwards_and_new_instance(robot):
    a1, a2 = _state(robot, seq=1), _state(robot, seq=2)
    assert order(None, a1) == "first"
    assert order(a1, a2) == "advanced"
    assert order(a2, a2) == "repeated"
    assert order(a2, a1) == "backwards"
    assert order(a2, _state(robot, seq=0, instance="b" * 32)) == "new_instance"
