#!/bin/bash
# site.sh — what differs from one cluster to the next, in one place: the
# modules to load and the network settings. hpc/launch.sh sources it at the
# start of every job, so each line here applies to every job script.
#
# Everything below is off (commented out) by default: a machine where the
# workbook was built with Debian's packages needs none of it.
# shellcheck shell=bash

# ---- SITE: modules -------------------------------------------------------------
# The compiler, MPI, CUDA and LibTorch the workbook was built with must also
# be there when the job runs. Uncomment and adapt (`module avail` lists them):
#
# module purge
# module load gcc/12 openmpi/4.1 cuda/12.4 cmake/3.27
# export CMAKE_PREFIX_PATH=$HOME/libtorch:${CMAKE_PREFIX_PATH:-}
# export LD_LIBRARY_PATH=$HOME/libtorch/lib:${LD_LIBRARY_PATH:-}

# ---- the data ------------------------------------------------------------------
# Fashion-MNIST on a filesystem every node mounts (data/README.md says where
# to get it). The smoke test's last column shows where each node found it.
#
# export WORKBOOK_DATA=/shared/datasets/fashion-mnist

# ---- NCCL: what it says, and which network it uses -----------------------------
# NCCL_DEBUG=INFO makes NCCL print, at start-up, the interface and transport
# it chose (look for "NET/IB" or "NET/Socket : Using [0]ib0"). Turn it on when
# the smoke test's busbw between nodes is far below the network's speed.
#
# export NCCL_DEBUG=INFO
# export NCCL_DEBUG_SUBSYS=INIT,NET
#
# The interface between nodes. NCCL picks one itself, and can pick the wrong
# one: lo or docker0 (ranks on different nodes then never connect and the
# job hangs at start-up until --comm-timeout), or a slow management
# Ethernet instead of InfiniBand. Name it (`ip -br addr` on a compute node
# lists them; a prefix such as ib matches ib0, ib1):
#
# export NCCL_SOCKET_IFNAME=ib0
#
# InfiniBand: NCCL uses it when it finds it. Turn it off to test over TCP,
# or choose the adapters when a node has several (`ibv_devinfo` lists them):
#
# export NCCL_IB_DISABLE=1
# export NCCL_IB_HCA=mlx5_0,mlx5_1

# ---- Open MPI: the same choice for the CPU chapters ----------------------------
# Open MPI's TCP transport between nodes, on the same interface as above
# (Open MPI takes a full interface name or a subnet such as 10.0.0.0/16):
#
# export OMPI_MCA_btl_tcp_if_include=ib0
# export OMPI_MCA_oob_tcp_if_include=ib0
