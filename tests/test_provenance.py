"""Results JSON provenance: a commit hash or "unknown", never a wrong value."""
import re
import subprocess

from megakernel import provenance
from megakernel.provenance import git_commit


def test_env_override_is_validated(monkeypatch):
    monkeypatch.setenv("GIT_COMMIT", "5952de4b6320e639772b1953b5c5be7bdca34dff")
    assert git_commit() == "5952de4b6320e639772b1953b5c5be7bdca34dff"
    monkeypatch.setenv("GIT_COMMIT", "HEAD")  # what `git rev-parse HEAD` echoes outside a repository
    assert git_commit() == "unknown"


def test_outside_a_repository(monkeypatch, tmp_path):
    monkeypatch.delenv("GIT_COMMIT", raising=False)
    monkeypatch.setattr(provenance, "REPO", tmp_path)
    assert git_commit() == "unknown"


def test_inside_the_checkout(monkeypatch, tmp_path):
    monkeypatch.delenv("GIT_COMMIT", raising=False)
    monkeypatch.chdir(tmp_path)  # the commit is the package's checkout's, wherever the caller stands
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True,
                              cwd=provenance.REPO).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        head = "unknown"  # a source copy without .git
    assert git_commit() == (head if re.fullmatch(r"[0-9a-f]{40}", head) else "unknown")
