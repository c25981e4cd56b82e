"""Helpers shared by the test modules (import as ``support.<module>``; tests/ is on sys.path):
cli (the one way to run the command line; zygote, its warm interpreter), engine (small trees and
series), failures (the failure-path trees), sshd (a real OpenSSH server on 127.0.0.1, fixtures),
upstream (the pinned wheels and trees, fixtures), ast_checks, rebase_oracle, series,
timing_files, invoke_yaml; and the stand-ins that tests run as programs: standin_server (an
SGLang server and benchmark), kubectl_standin, fake_cuda_torch, and clock/fake_clock (a fake
host clock for the runtime's scenarios, alone in its folder so that a scenario adds nothing
else to its sys.path)."""
