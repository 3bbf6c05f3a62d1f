"""The one compiled piece: protocol/_wire.c, the bus's hot path (frame I/O, MAC, decoder, model,
envelope writer; issue 34).

Optional: without a C compiler or OpenSSL's headers the install still succeeds and the bus runs
its pure-Python paths (protocol/accel.py says which one a process uses)."""
from setuptools import Extension, setup

setup(ext_modules=[Extension(
    "protocol._wire", ["protocol/_wire.c"], libraries=["crypto", "dl"], optional=True,
    extra_compile_args=["-O2", "-Wno-deprecated-declarations"])])
