"""The `--nats URL` credential options (ops.nats_args), the same on serve, boot, gateway, audit and the
drill node: one kind of credentials, read from files, never shown."""
from __future__ import annotations

import pytest

from eventlog import NatsAuth
from ops.cli import build_parser
from ops.nats_args import NatsArgsError, nats_auth

BOOT = ["boot", "--runtime", "r", "--service-grants", "g"]


def _auth(*argv: str) -> NatsAuth | None:
    return nats_auth(build_parser().parse_args(list(argv)))


def test_each_kind_of_credentials(tmp_path):
    (tmp_path / "pw").write_text("s3cret-password\n")
    (tmp_path / "tok").write_text("s3cret-token\n")
    (tmp_path / "u.creds").write_text("-----BEGIN NATS USER JWT-----\n")
    (tmp_path / "u.nk").write_text("SUAEXAMPLE\n")
    for cmd in (BOOT, ["gateway", "--config", "c"], ["audit"], ["serve"]):
        assert _auth(*cmd, "--nats", "nats://h:4222") is None
        assert _auth(*cmd, "--nats", "nats://u:p@h:4222") is None  # the URL's own: nats-py reads them
        auth = _auth(*cmd, "--nats", "nats://h:4222", "--nats-user", "rt", "--nats-password-file",
                     str(tmp_path / "pw"))
        assert auth == NatsAuth(user="rt", password="s3cret-password")
        assert auth.connect_options() == {"user": "rt", "password": "s3cret-password"}
    assert _auth(*BOOT, "--nats", "nats://h", "--nats-token-file", str(tmp_path / "tok")).connect_options() == {
        "token": "s3cret-token"}
    assert _auth(*BOOT, "--nats", "nats://h", "--nats-creds", str(tmp_path / "u.creds")).connect_options() == {
        "user_credentials": str(tmp_path / "u.creds")}
    assert _auth(*BOOT, "--nats", "nats://h", "--nats-nkey", str(tmp_path / "u.nk")).connect_options() == {
        "nkeys_seed": str(tmp_path / "u.nk")}
    shown = repr(_auth(*BOOT, "--nats", "nats://h", "--nats-user", "rt", "--nats-password-file",
                       str(tmp_path / "pw"))) + str(_auth(*BOOT, "--nats", "nats://h", "--nats-token-file",
                                                          str(tmp_path / "tok")))
    assert "s3cret" not in shown


@pytest.mark.parametrize("extra, message", [
    (["--nats-user", "rt"], "go together"),
    (["--nats-password-file", "PW"], "go together"),
    (["--nats-user", "rt", "--nats-password-file", "PW", "--nats-token-file", "PW"], "one kind"),
    (["--nats-token-file", "MISSING"], "cannot read"),
    (["--nats-creds", "MISSING"], "does not exist"),
    (["--nats-token-file", "EMPTY"], "is empty"),
])
def test_credentials_that_do_not_fit_are_refused(tmp_path, extra, message):
    (tmp_path / "pw").write_text("s3cret-password\n")
    (tmp_path / "empty").write_text("\n")
    paths = {"PW": tmp_path / "pw", "MISSING": tmp_path / "missing", "EMPTY": tmp_path / "empty"}
    with pytest.raises(NatsArgsError, match=message) as err:
        _auth(*BOOT, "--nats", "nats://h", *[str(paths.get(a, a)) for a in extra])
    assert "s3cret" not in str(err.value)


def test_credentials_once_and_only_with_a_url(tmp_path):
    (tmp_path / "pw").write_text("pw\n")
    flags = ["--nats-user", "rt", "--nats-password-file", str(tmp_path / "pw")]
    with pytest.raises(NatsArgsError, match="once"):
        _auth(*BOOT, "--nats", "nats://u:p@h:4222", *flags)
    with pytest.raises(NatsArgsError, match="need --nats"):
        _auth("serve", *flags)
