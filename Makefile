# SPDX-License-Identifier: GPL-2.0
#
# User-facing targets of MRC for Linux. The module itself is described in
# Kbuild; this file drives it and everything around it.
#
#   make            build mrc.ko against KDIR
#   make setup      install the toolchain and build the test kernel (cached)
#   make check      every test: host, style, lints, build, VM selftests
#   make demo       boot the test kernel in a VM and show MRC at work
#   make demo-pytorch  PyTorch DDP training over MRC and TCP in the VM, a plane lost
#   make tools      build the userspace tools under tools/
#   make netlink-gen regenerate the netlink uapi header from netlink/mrc.yaml
#   make bench      benchmarks against MPTCP, SCTP, TCP in the VM (BENCHMARKS.md)
#   make profile    perf profile of one transfer over a veth in the VM (PROTO=, SECS=)
#   make ab A=REV [B=REV]  two builds of mrc.ko interleaved in one VM boot, TCP alongside

SHELL := /bin/bash
TOP := $(abspath $(dir $(lastword $(MAKEFILE_LIST))))

# The project's test kernel when it has been built, else the running kernel.
KDIR ?= $(shell $(TOP)/scripts/kdir.sh debug)
LLVM ?= -14
KSRC ?= $(shell . $(TOP)/scripts/env.sh && kernel_src_dir)
export PATH := $(HOME)/.cargo/bin:$(PATH)

KMAKE = $(MAKE) -C $(KDIR) M=$(TOP) LLVM=$(LLVM)
RUST_SRCS = $(filter-out %_generated.rs,$(wildcard $(TOP)/*.rs))

.PHONY: all modules clippy setup check demo tools test-host fmt fmt-check clean help \
	netlink-gen netlink-check

all: modules

modules:
	$(KMAKE) modules

# Lint the module with the kernel's clippy settings.
clippy:
	$(KMAKE) CLIPPY=1 modules

setup:
	$(TOP)/scripts/setup.sh debug

tools:
	cd $(TOP)/tools && cargo build --release

test-host:
	cd $(TOP)/tools && cargo test

fmt:
	rustfmt --edition 2021 $(RUST_SRCS)
	cd $(TOP)/tools && cargo fmt --all

fmt-check:
	rustfmt --edition 2021 --check $(RUST_SRCS)
	cd $(TOP)/tools && cargo fmt --all --check

# The generic netlink uapi header is generated from netlink/mrc.yaml.
netlink-gen:
	$(TOP)/netlink/ynl-gen.sh $(KSRC)

netlink-check:
	$(TOP)/netlink/ynl-gen.sh --check $(KSRC)

check:
	$(TOP)/scripts/check.sh

demo:
	$(TOP)/scripts/demo.sh

# DDP training (demo/pytorch/train.py) between two namespaces in the VM,
# over MRC (mrcize) and over TCP, each once with plane 2 taken down
# mid-training; a summary table at the end. DEMO_* settings in
# scripts/demo-pytorch-guest.sh.
.PHONY: demo-pytorch
demo-pytorch:
	$(TOP)/scripts/demo-pytorch.sh

# MRC against MPTCP, SCTP and TCP on the release test kernel in the VM;
# writes bench/results.json, bench/plots/ and the tables of BENCHMARKS.md.
# BENCH_QUICK=1 for a smoke run; other settings in BENCHMARKS.md.
.PHONY: bench
bench:
	$(TOP)/bench/bench.sh

# Where the CPU goes in one transfer over an unshaped veth (perf in the
# release VM). PROTO=mrc|tcp|mptcp|sctp, SECS of sampling, MRC_PARAMS for
# insmod.
.PHONY: profile
profile:
	$(TOP)/bench/profile.sh $(or $(PROTO),mrc) $(or $(SECS),4)

# Goodput and CPU per MB of two builds of the module (A, B: git revisions;
# B defaults to the working tree), interleaved in one boot of the release
# VM with TCP alongside. Settings in bench/ab.sh.
.PHONY: ab
ab:
	$(TOP)/bench/ab.sh $(A) $(B)

clean:
	-[ -d "$(KDIR)" ] && $(KMAKE) clean
	rm -f $(TOP)/mrc_bindings_generated.rs

help:
	@sed -n '3,15p' $(TOP)/Makefile | sed 's/^# \{0,1\}//'
