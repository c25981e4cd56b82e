"""Helpers shared by the test modules, the only part of tests/ a test module imports (as
``support.<module>``; tests/ is on sys.path through pyproject.toml's pytest ``pythonpath``):
cli (the one way to run the command line; zygote, its warm interpreter), engine (small trees and
series), failures (the failure-path trees), crash_tree and shims (the fault tests' tree and PATH
shims), sshd (a real OpenSSH server on 127.0.0.1, fixtures), upstream (the pinned wheels and
trees, fixtures), remote_run and remote_sweep (profile.remote against the stand-ins),
default_site (profile.run's transformers site), timing_scripts (runtime scenarios in a fresh
interpreter), ast_checks, rebase_oracle, series, timing_files, invoke_yaml; and the stand-ins
that tests run as programs: standin_server (an SGLang server and benchmark), kubectl_standin,
fake_cuda_torch, and clock/fake_clock (a fake host clock for the runtime's scenarios, alone in
its folder so that a scenario adds nothing else to its sys.path)."""
