"""perckit push: huggingface_hub's folder uploads, replaced at the HfApi boundary (tests/helpers/fake_hub.py).

The recorder checks every call against the real method's signature and selects the uploaded files with
huggingface_hub's own ``filter_repo_objects``, so a wrong ``allow_patterns`` really uploads the wrong files."""

import json
import os

import pytest
from helpers.fake_hub import HubRecorder

from perckit.export import push
from perckit.errors import HubError, InputNotFoundError, OptionError, ReleaseFormatError
from perckit.export.push import literal_pattern, push_export

FEATURES = {"x": {"dtype": "int64", "_type": "Value"}}
QUIET = {"log": lambda m: None}


def _split(name, files):
    return {"name": name, "num_examples": 1, "num_bytes": 1, "files": files}


def make_export(root, benchmark="r4d_bench", configs=None):
    """A small export on disk: ``configs`` maps a config name to (default, number of test shards); a record v2, a
    card, stray files the record does not list (which must never be uploaded)."""
    configs = configs or {"all_queries": (True, 2), "frames": (False, 1)}
    record = {"format": "perckit-export", "version": 2, "benchmark": benchmark, "configs": {}}
    for name, (default, n) in configs.items():
        folder = "data" if default else name
        files = [f"{folder}/test-{i:05d}-of-{n:05d}.parquet" for i in range(n)]
        for i, rel in enumerate(files):
            (root / folder).mkdir(parents=True, exist_ok=True)
            (root / rel).write_bytes(f"{name} shard {i}".encode())
        record["configs"][name] = {"default": default, "dir": folder, "features": FEATURES, "splits": [_split("test", files)]}
    (root / "README.md").write_text("---\nconfigs: []\n---\n# card\n")
    (root / "notes.txt").write_text("the user's notes")
    (root / ".cache" / "huggingface" / "upload" / "data").mkdir(parents=True)
    (root / ".cache" / "huggingface" / "upload" / "data" / "test-00000-of-00002.parquet.metadata").write_text("state")
    (root / "data").mkdir(exist_ok=True)
    (root / "data" / "draft.parquet").write_bytes(b"not in the record")
    (root / ".perckit_export.json").write_text(json.dumps(record))
    return root


def record_files(root):
    record = json.loads((root / ".perckit_export.json").read_text())
    return sorted(f for c in record["configs"].values() for s in c["splits"] for f in s["files"])


@pytest.fixture
def hub(monkeypatch):
    return HubRecorder().install(monkeypatch)


def test_pushes_exactly_the_record_files_then_the_card_and_deletes_nothing(tmp_path, hub):
    out = make_export(tmp_path / "e")
    hub.repos[("org/r4d", "main")] = {"other_config/test-00000-of-00001.parquet": b"keep me", "README.md": b"old card"}
    summary = push_export(out, "org/r4d", token="hf_x", **QUIET)
    assert hub.names() == ["create_repo", "upload_folder", "upload_file"]  # the card last, in its own commit
    folder = hub.calls[1][1]
    assert folder["sent"] == record_files(out)  # not the record, the notes, the draft, nor .cache/huggingface
    assert folder["delete_patterns"] is None and folder["folder_path"] == str(out)
    assert "all_queries" in folder["commit_message"] and "frames" in folder["commit_message"]
    assert hub.calls[2][1]["path_in_repo"] == "README.md"
    repo = hub.repos[("org/r4d", "main")]
    assert repo.pop("other_config/test-00000-of-00001.parquet") == b"keep me"  # never deleted
    assert sorted(repo) == sorted(record_files(out) + ["README.md"])
    assert all(repo[rel] == (out / rel).read_bytes() for rel in repo)
    assert summary.method == "upload_folder" and summary.files == record_files(out) and len(summary.commits) == 2
    assert summary.num_bytes == sum(os.path.getsize(out / f) for f in record_files(out))


def test_a_config_subset_and_the_child_configs_it_wrote(tmp_path, hub):
    out = make_export(tmp_path / "e")
    logs = []
    summary = push_export(out, "org/r4d", configs=["frames"], log=logs.append)
    assert summary.files == ["frames/test-00000-of-00001.parquet"]
    assert sorted(hub.repos[("org/r4d", "main")]) == ["README.md", "frames/test-00000-of-00001.parquet"]
    assert any("all_queries" in m and "card lists" in m for m in logs)  # the card names a config not pushed now

    av = make_export(tmp_path / "av", benchmark="reason_av_edit", configs={"default": (True, 1)})
    record = json.loads((av / ".perckit_export.json").read_text())
    (av / "videos").mkdir()
    (av / "videos" / "test-00000-of-00001.parquet").write_bytes(b"videos shard")
    record["configs"]["videos"] = {"default": False, "dir": "videos", "features": FEATURES, "kind": "parquet", "parent": "default",
                                   "splits": [_split("test", ["videos/test-00000-of-00001.parquet"])]}
    (av / ".perckit_export.json").write_text(json.dumps(record))
    assert push_export(av, "org/av", configs=["default"], **QUIET).files == [
        "data/test-00000-of-00001.parquet", "videos/test-00000-of-00001.parquet"]
    assert sorted(hub.repos[("org/av", "main")]) == sorted(record_files(av) + ["README.md"])


@pytest.mark.parametrize("shards, big_bytes, large, method", [
    (2, False, None, "upload_folder"),
    (101, False, None, "upload_large_folder"),   # more than 100 files
    (2, True, None, "upload_large_folder"),      # more than LARGE_FOLDER_BYTES
    (2, False, True, "upload_large_folder"),
    (101, True, False, "upload_folder"),
])
def test_the_method_on_a_huggingface_hub_with_upload_large_folder(tmp_path, monkeypatch, shards, big_bytes, large, method):
    hub = HubRecorder().install(monkeypatch, large_folder=True)
    monkeypatch.setattr(push, "folder_upload_resumes", lambda: False)  # an older huggingface_hub (before 1.20)
    if big_bytes:
        monkeypatch.setattr(push, "LARGE_FOLDER_BYTES", 10)
    out = make_export(tmp_path / "e", configs={"all_queries": (True, shards)})
    summary = push_export(out, "org/r4d", revision="dev", large=large, **QUIET)
    assert summary.method == method and hub.names() == ["create_repo", method, "upload_file"]
    upload = hub.calls[1][1]
    assert upload["sent"] == record_files(out) and upload["revision"] == "dev"
    if method == "upload_large_folder":
        assert upload["private"] is True  # private by default; the card is never part of the large upload: it follows alone
    assert sorted(hub.repos[("org/r4d", "dev")]) == sorted(record_files(out) + ["README.md"])


def test_this_huggingface_hub_uses_its_resumable_upload_folder_even_for_a_large_export(tmp_path, hub):
    from huggingface_hub import HfApi

    if not push.folder_upload_resumes():
        pytest.skip("this huggingface_hub's upload_folder is not the resumable one (before 1.20 or no hf_xet)")
    out = make_export(tmp_path / "e", configs={"all_queries": (True, 101)})
    assert not hasattr(HfApi, "upload_large_folder") or push.choose_method(0, 0, True) == "upload_folder"
    assert push_export(out, "org/r4d", large=True, **QUIET).method == "upload_folder"
    assert hub.names() == ["create_repo", "upload_folder", "upload_file"] and len(hub.calls[1][1]["sent"]) == 101


def test_without_a_resumable_upload_upload_folder_and_a_note(tmp_path, monkeypatch):
    from huggingface_hub import HfApi

    hub = HubRecorder().install(monkeypatch)
    monkeypatch.setattr(push, "folder_upload_resumes", lambda: False)
    monkeypatch.delattr(HfApi, "upload_large_folder", raising=False)  # huggingface_hub 2.x without hf_xet
    logs = []
    summary = push_export(make_export(tmp_path / "e", configs={"all_queries": (True, 101)}), "org/r4d", log=logs.append)
    assert summary.method == "upload_folder" and hub.names()[1] == "upload_folder"
    assert any("install hf_xet" in m for m in logs)


def test_patterns_match_names_literally():
    from huggingface_hub.utils import filter_repo_objects

    names = ["data/a[1]*?.parquet", "data/a1x.parquet", "data/a1*?.parquet", "data/a[1]xy.parquet"]
    assert literal_pattern("data/a[1]*?.parquet") == "data/a[[]1][*][?].parquet"
    for name in names:
        assert list(filter_repo_objects(names, allow_patterns=[literal_pattern(name)])) == [name]


def test_a_name_with_brackets_uploads_only_itself(tmp_path, hub, monkeypatch):
    out = make_export(tmp_path / "e", configs={"all_queries": (True, 1)})
    for name in ("a[1].parquet", "a1.parquet", "a2.parquet"):
        (out / "data" / name).write_bytes(name.encode())
    real = push._select
    monkeypatch.setattr(push, "_select", lambda d, c: (real(d, c)[0], ["all_queries"], ["data/a[1].parquet"]))
    push_export(out, "org/r4d", **QUIET)
    assert hub.calls[1][1]["sent"] == ["data/a[1].parquet"]  # unescaped, "[1]" would match a1.parquet instead
    assert sorted(hub.repos[("org/r4d", "main")]) == ["README.md", "data/a[1].parquet"]


def test_an_interrupted_push_leaves_the_old_card_and_a_rerun_resumes(tmp_path, hub):
    out = make_export(tmp_path / "e")
    hub.repos[("org/r4d", "main")] = {"README.md": b"old card"}
    hub.fail_after_files = 1
    with pytest.raises(HubError, match=r"^pushing to org/r4d: the Hub at https://\S+ could not be reached \(ConnectionError: simulated"):
        push_export(out, "org/r4d", **QUIET)
    repo = hub.repos[("org/r4d", "main")]
    assert repo["README.md"] == b"old card" and len(repo) == 2  # one data file arrived; the card was not sent
    assert hub.names() == ["create_repo", "upload_folder"]
    first = hub.calls[1][1]["allow_patterns"]
    push_export(out, "org/r4d", **QUIET)  # the same call again: huggingface_hub resumes it
    assert hub.names() == ["create_repo", "upload_folder", "create_repo", "upload_folder", "upload_file"]
    assert hub.calls[3][1]["allow_patterns"] == first
    assert sorted(repo) == sorted(record_files(out) + ["README.md"]) and repo["README.md"] == (out / "README.md").read_bytes()


def test_revision_and_the_private_default_are_passed_through(tmp_path, hub):
    out = make_export(tmp_path / "e")
    summary = push_export(out, "org/r4d", revision="v2", endpoint="http://127.0.0.1:9", **QUIET)
    assert hub.created[0]["private"] is True and summary.revision == "v2"
    assert hub.calls[1][1]["revision"] == "v2" and hub.calls[2][1]["revision"] == "v2"
    assert sorted(hub.repos[("org/r4d", "v2")]) == sorted(record_files(out) + ["README.md"])
    assert hub.repos[("org/r4d", "main")] == {}


def _missing(out):
    (out / "frames" / "test-00000-of-00001.parquet").unlink()


def _linked_out(out):
    target = out.parent / "secret.parquet"
    target.write_bytes(b"secret")
    (out / "frames" / "test-00000-of-00001.parquet").unlink()
    (out / "frames" / "test-00000-of-00001.parquet").symlink_to(target)


def _no_card(out):
    (out / "README.md").unlink()


def _planted_path(out):
    record = json.loads((out / ".perckit_export.json").read_text())
    record["configs"]["frames"]["splits"][0]["files"] = ["../secret.parquet"]
    (out / ".perckit_export.json").write_text(json.dumps(record))


@pytest.mark.parametrize("spoil, error, words", [
    (_missing, InputNotFoundError, "got nothing (the export is incomplete)"),
    (_linked_out, ReleaseFormatError, "symbolic link"),
    (_no_card, InputNotFoundError, "'README.md'"),
    (_planted_path, ReleaseFormatError, "secret.parquet"),
], ids=["missing", "linked-out", "no-card", "planted-path"])
def test_record_errors_come_before_any_hub_call(tmp_path, hub, spoil, error, words):
    out = make_export(tmp_path / "e")
    spoil(out)
    with pytest.raises(error) as e:
        push_export(out, "org/r4d", **QUIET)
    assert words in str(e.value)
    assert hub.calls == [] and hub.lookups == [] and hub.repos == {}


def test_unknown_config_and_not_an_export_before_any_hub_call(tmp_path, hub):
    out = make_export(tmp_path / "e")
    with pytest.raises(InputNotFoundError, match="'nope'"):
        push_export(out, "org/r4d", configs=["nope"], **QUIET)
    with pytest.raises(InputNotFoundError, match="not a perckit export"):
        push_export(tmp_path / "absent", "org/r4d", **QUIET)
    assert hub.calls == [] and hub.lookups == []


@pytest.fixture(scope="module")
def r4d_export(r4d_release, tmp_path_factory):
    from perckit.export import convert

    out = tmp_path_factory.mktemp("push") / "r4d"
    cache = tmp_path_factory.mktemp("push_cache")
    convert("r4d_bench", r4d_release.root, "all_queries", out, cache_dir=cache, progress=False, log=lambda m: None)
    return out, cache


def test_cli_push_skip_convert(r4d_export, hub, capsys):
    from perckit.__main__ import main

    out, _ = r4d_export
    assert main(["push", "r4d_bench", "--repo-id", "org/r4d", "--output", str(out), "--skip-convert", "--revision", "dev"]) == 0
    out_text = capsys.readouterr().out
    assert "with HfApi.upload_folder" in out_text
    assert "org/r4d@dev: 1 data file(s) and README.md sent to the private dataset repository" in out_text
    assert out_text.splitlines()[-1].endswith(f"the export stays in {out}")  # the last line: where the files are (issue 33)
    assert hub.created[0]["private"] is True  # private unless --public
    assert sorted(hub.repos[("org/r4d", "dev")]) == ["README.md", "data/test-00000-of-00001.parquet"]
    assert main(["push", "r4d_bench", "--repo-id", "org/r4d", "--output", str(out / "nope"), "--skip-convert"]) == 2
    assert "not a perckit export" in capsys.readouterr().err


def test_convert_after_a_push_keeps_the_upload_state_and_never_uploads_it(r4d_release, r4d_export, hub, tmp_path):
    import shutil

    from perckit.export import convert

    src, cache = r4d_export
    out = tmp_path / "r4d"
    shutil.copytree(src, out)
    state = out / ".cache" / "huggingface" / "upload" / "data" / "test-00000-of-00001.parquet.metadata"
    state.parent.mkdir(parents=True)
    state.write_text("upload_large_folder's resumable state")  # what huggingface_hub < 2.0 leaves in the folder
    push_export(out, "org/r4d", **QUIET)
    convert("r4d_bench", r4d_release.root, "frames", out, cache_dir=cache, progress=False, log=lambda m: None)
    assert state.read_text() == "upload_large_folder's resumable state"  # the swap keeps files it did not write
    summary = push_export(out, "org/r4d", **QUIET)
    assert summary.files == ["data/test-00000-of-00001.parquet", "frames/test-00000-of-00001.parquet"]
    assert not any(p.startswith(".cache") or p == ".perckit_export.json" for p in hub.repos[("org/r4d", "main")])


# Pushing safely (issue 31): the login before any conversion, private by default, a public push of a licence that does
# not grant redistribution refused unless --i-may-redistribute, every Hub failure one line.

#: the licence names of the benchmarks whose builder card licence does not grant redistribution
RESTRICTED = {"r4d_bench": "r4d-bench-no-licence-file-ask-the-maintainers", "syn4d": "syn4d-no-licence-stated",
              "reason_av_edit": "research-only"}


@pytest.mark.parametrize("benchmark", ["r4d_bench", "syn4d", "reason_av_edit", "refcoco_m", "m4seg"])
def test_the_licence_rule_for_every_benchmark(benchmark):
    from perckit.hf.benchmark import NAMES

    assert set(NAMES) == {"r4d_bench", "syn4d", "reason_av_edit", "refcoco_m", "m4seg"}  # a new one is added here
    push.check_public(benchmark, public=False, may_redistribute=False)  # private: always
    push.check_public(benchmark, public=True, may_redistribute=True)  # the user says they may publish it
    if benchmark not in RESTRICTED:  # mit, cc-by-4.0
        push.check_public(benchmark, public=True, may_redistribute=False)
        return
    with pytest.raises(OptionError) as e:
        push.check_public(benchmark, public=True, may_redistribute=False)
    assert f"the {benchmark} licence is 'other' ({RESTRICTED[benchmark]}, https://" in str(e.value)
    assert "--i-may-redistribute" in str(e.value) and "leave out --public" in str(e.value)


def _http_error(status):
    from huggingface_hub.utils import HfHubHTTPError
    from helpers.fake_hub import http_response

    return HfHubHTTPError(f"{status} Client Error: for url: https://hub.example/api/x\nRequest ID: abc", response=http_response(status))


def _raised_in_huggingface_hub():
    """A RuntimeError raised by huggingface_hub's own code (its commit API wraps a failed LFS upload so)."""
    code = compile("def upload():\n    raise RuntimeError(\"Error while uploading 'a.parquet' to the Hub.\")\n", "<hub>", "exec")
    scope = {"__name__": "huggingface_hub._commit_api"}
    exec(code, scope)
    scope["upload"]()


def _raise(error):
    raise error


@pytest.mark.parametrize("make, words", [
    (lambda: _raise(__import__("huggingface_hub.utils", fromlist=["x"]).LocalTokenNotFoundError("Token is required")),
     "the Hub at https://hub.example has no login here (no token found); log in with `hf auth login`"),
    (lambda: _raise(_http_error(401)), "refused the token (HTTP 401); log in with `hf auth login`"),
    (lambda: _raise(_http_error(403)), "answered HTTP 403 (HfHubHTTPError: 403 Client Error: for url: https://hub.example/api/x "
                                       "Request ID: abc); the token may not write there"),
    (lambda: _raise(_http_error(500)), "answered HTTP 500"),
    (lambda: _raise(ConnectionError("[Errno -2] Name or service not known")),
     "the Hub at https://hub.example could not be reached (ConnectionError: [Errno -2] Name or service not known); check the network"),
    (lambda: _raise(TimeoutError("timed out")), "the Hub at https://hub.example could not be reached (TimeoutError: timed out)"),
    (lambda: _raise(__import__("huggingface_hub.utils", fromlist=["x"]).OfflineModeIsEnabled("HF_HUB_OFFLINE is set")),
     "the Hub at https://hub.example could not be reached (OfflineModeIsEnabled: HF_HUB_OFFLINE is set)"),
    (lambda: _raise(type("ConnectError", (Exception,), {"__module__": "httpx"})("[Errno 111] Connection refused")),
     "the Hub at https://hub.example could not be reached (ConnectError: [Errno 111] Connection refused)"),
    (_raised_in_huggingface_hub, "the Hub at https://hub.example did not take the call (RuntimeError: Error while uploading 'a.parquet' to the Hub.)"),
], ids=["no-token", "401", "403", "500", "dns", "timeout", "offline-mode", "httpx-connect", "raised-in-hub-code"])
def test_hub_errors_become_one_hub_error_line(make, words):
    from perckit.hf.hub import hub_errors

    with pytest.raises(HubError) as e:
        with hub_errors("pushing to org/x", "https://hub.example"):
            make()
    assert str(e.value).startswith("pushing to org/x: ") and words in str(e.value) and "\n" not in str(e.value)
    assert e.value.__cause__ is None and isinstance(e.value, OSError)


@pytest.mark.parametrize("error", [OptionError("--public: no"), KeyError("a bug"), FileNotFoundError(2, "No such file")])
def test_hub_errors_let_other_errors_through(error):
    from perckit.hf.hub import hub_errors

    with pytest.raises(type(error)) as e:
        with hub_errors("pushing to org/x", "https://hub.example"):
            raise error
    assert e.value is error


def _cli(argv, capsys):
    """``perckit push ARGV``: (exit code, stdout, stderr)."""
    from perckit.__main__ import main

    code = main(["push", *argv])
    out, err = capsys.readouterr()
    return code, out, err


def _one_error_line(err, words):
    assert err.startswith("error: ") and err.count("\n") == 1 and "Traceback" not in err, err
    assert words in err, err


@pytest.fixture
def no_conversion(monkeypatch):
    """Converting fails the test: the refusals must come first."""
    import perckit.export

    def refuse(*a, **k):
        raise AssertionError("the conversion started")

    monkeypatch.setattr(perckit.export, "convert", refuse)


@pytest.mark.parametrize("error, code, words", [
    (ConnectionError("[Errno -2] Name or service not known"), 1,
     "error: checking the Hub login for org/r4d: the Hub at https://huggingface.co could not be reached (ConnectionError: "
     "[Errno -2] Name or service not known); check the network connection"),
    ("401", 1, "refused the token (HTTP 401); log in with `hf auth login` (a token with write access) or pass --token"),
    ("no-token", 1, "has no login here (no token found); log in with `hf auth login`"),
], ids=["offline", "bad-token", "no-token"])
@pytest.mark.parametrize("skip_convert", [False, True], ids=["convert", "skip-convert"])
def test_the_login_is_checked_before_converting_or_reading_the_export(tmp_path, hub, no_conversion, capsys, monkeypatch,
                                                                     error, code, words, skip_convert):
    from huggingface_hub.utils import LocalTokenNotFoundError

    monkeypatch.setattr("huggingface_hub.constants.ENDPOINT", "https://huggingface.co")
    hub.login_error = {"401": _http_error(401), "no-token": LocalTokenNotFoundError("Token is required")}.get(error, error)
    (tmp_path / "release").mkdir()
    source = ["--skip-convert"] if skip_convert else ["--data-dir", str(tmp_path / "release")]
    # with --skip-convert the folder is not an export at all: the login error comes before reading it
    result = _cli(["r4d_bench", "--repo-id", "org/r4d", "--output", str(tmp_path / "e"), "--token", "hf_x", *source], capsys)
    assert result[0] == code
    _one_error_line(result[2], words)
    assert hub.lookups == [("whoami", {"token": None, "cache": False, "api_token": "hf_x"})]  # --token is the one checked
    assert hub.calls == [] and not (tmp_path / "e").exists()


def test_an_account_that_cannot_write_there_is_refused_before_converting(tmp_path, hub, no_conversion, capsys):
    (tmp_path / "release").mkdir()
    argv = ["r4d_bench", "--output", str(tmp_path / "e"), "--data-dir", str(tmp_path / "release")]
    code, _, err = _cli([*argv, "--repo-id", "someone-else/r4d"], capsys)
    assert code == 2
    _one_error_line(err, "--repo-id 'someone-else/r4d': expected a repository of 'student' or of its organisations ['org'], "
                         "got one of 'someone-else', where its token cannot write; push to student/r4d instead")
    hub.account["auth"]["accessToken"]["role"] = "read"
    code, _, err = _cli([*argv, "--repo-id", "org/r4d"], capsys)
    assert code == 1
    _one_error_line(err, "the Hub token of 'student' is read-only; log in with a write token (`hf auth login`) or pass --token")
    assert hub.calls == []


def test_public_with_a_restricted_licence_is_refused_naming_it_and_allowed_with_the_flag(tmp_path, hub, no_conversion, capsys):
    out = make_export(tmp_path / "e")  # r4d_bench: other, no licence file
    code, _, err = _cli(["r4d_bench", "--repo-id", "org/r4d", "--output", str(out), "--skip-convert", "--public"], capsys)
    assert code == 2
    _one_error_line(err, "error: --public: the r4d_bench licence is 'other' (r4d-bench-no-licence-file-ask-the-maintainers, "
                         "https://huggingface.co/datasets/LiYacheng/r4d-bench-qa), which does not grant redistribution")
    assert hub.calls == [] and [name for name, _ in hub.lookups] == ["whoami"]  # --skip-convert: the login, then the record
    hub.lookups.clear()
    (tmp_path / "release").mkdir()
    code, _, err = _cli(["reason_av_edit", "--repo-id", "org/av", "--data-dir", str(tmp_path / "release"), "--public",
                         "--output", str(tmp_path / "av")], capsys)
    assert code == 2 and hub.lookups == []  # refused before the login and the conversion
    _one_error_line(err, "the reason_av_edit licence is 'other' (research-only, ")

    code, out_text, _ = _cli(["r4d_bench", "--repo-id", "org/r4d", "--output", str(out), "--skip-convert", "--public",
                              "--i-may-redistribute"], capsys)
    assert code == 0 and "org/r4d: 3 data file(s) and README.md sent to the public dataset repository" in out_text
    assert hub.created[0]["private"] is False and sorted(hub.repos[("org/r4d", "main")]) == sorted(record_files(out) + ["README.md"])


def test_an_mit_benchmark_is_pushed_public_with_public_alone(tmp_path, hub, capsys):
    out = make_export(tmp_path / "e", benchmark="refcoco_m", configs={"expressions": (True, 1)})
    code, out_text, err = _cli(["refcoco_m", "--repo-id", "org/refcoco", "--output", str(out), "--skip-convert", "--public"], capsys)
    assert code == 0 and err == "" and "org/refcoco: 1 data file(s) and README.md sent to the public dataset repository" in out_text
    assert hub.created[0]["private"] is False and "org/refcoco" in hub.public


def test_an_existing_public_repository_takes_a_push_only_with_public(tmp_path, hub, capsys):
    out = make_export(tmp_path / "e", benchmark="refcoco_m", configs={"expressions": (True, 1)})
    hub.repos[("org/refcoco", "main")] = {"README.md": b"old card"}
    hub.public.add("org/refcoco")
    code, _, err = _cli(["refcoco_m", "--repo-id", "org/refcoco", "--output", str(out), "--skip-convert"], capsys)
    assert code == 2
    _one_error_line(err, "--repo-id 'org/refcoco': expected a private or new repository, got a public one; pass --public")
    assert hub.names() == ["create_repo"] and hub.repos[("org/refcoco", "main")] == {"README.md": b"old card"}  # exist_ok
    hub.public.clear()  # a private repository and --public: pushed, its visibility left as it is, and said so
    code, out_text, _ = _cli(["refcoco_m", "--repo-id", "org/refcoco", "--output", str(out), "--skip-convert", "--public"], capsys)
    assert code == 0 and "org/refcoco: 1 data file(s) and README.md sent to the private dataset repository" in out_text and "org/refcoco" not in hub.public


def test_a_failed_upload_is_one_line(tmp_path, hub, capsys):
    out = make_export(tmp_path / "e")
    hub.fail_after_files = 1
    code, _, err = _cli(["r4d_bench", "--repo-id", "org/r4d", "--output", str(out), "--skip-convert"], capsys)
    assert code == 1
    _one_error_line(err, "error: pushing to org/r4d: the Hub at https://")
    assert "could not be reached (ConnectionError: simulated interruption after 1 file(s)); check the network connection" in err


@pytest.mark.parametrize("error, words", [
    ("no-token", "pushing to org/r4d: the Hub at https://hub.example has no login here (no token found); log in with"),
    ("401", "pushing to org/r4d: the Hub at https://hub.example refused the token (HTTP 401); log in with"),
    ("403", "pushing to org/r4d: the Hub at https://hub.example answered HTTP 403 ("),
], ids=["no-token", "401", "403"])
def test_the_library_push_reports_a_login_failure_as_one_hub_error(tmp_path, hub, monkeypatch, error, words):
    """push_export does not call whoami (the CLI's check_account does, before converting): its first Hub call says it."""
    from huggingface_hub import HfApi
    from huggingface_hub.utils import LocalTokenNotFoundError

    def refuse(api, *a, **k):
        raise LocalTokenNotFoundError("Token is required") if error == "no-token" else _http_error(int(error))

    monkeypatch.setattr(HfApi, "create_repo", refuse)
    with pytest.raises(HubError) as e:
        push_export(make_export(tmp_path / "e"), "org/r4d", endpoint="https://hub.example", **QUIET)
    assert str(e.value).startswith(words) and "\n" not in str(e.value) and hub.calls == []
