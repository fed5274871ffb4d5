/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * MRC (Multi-path Reliable Connectivity): user API.
 *
 * Applications open sockets with socket(AF_MRC, SOCK_SEQPACKET, 0). AF_MRC is
 * a module parameter; the value of the loaded module is in
 * /sys/module/mrc/parameters/family and MRC_DEFAULT_FAMILY is its default.
 */
#ifndef _UAPI_LINUX_MRC_H
#define _UAPI_LINUX_MRC_H

#include <linux/types.h>
#include <linux/socket.h>

/* Slot 23 belonged to IrDA, removed from the kernel in 4.17. */
#define MRC_DEFAULT_FAMILY	23
#ifndef AF_MRC
#define AF_MRC			MRC_DEFAULT_FAMILY
#endif
#define PF_MRC			AF_MRC

/* UDP port of the per-namespace MRC tunnel socket (module parameter "port"). */
#define MRC_DEFAULT_UDP_PORT	4796

/* Level for setsockopt()/getsockopt() on MRC sockets. */
#define SOL_MRC			299

/* Largest message accepted by sendmsg(). */
#define MRC_MAX_MSG		(1U << 20)

/**
 * struct sockaddr_mrc - address of an MRC socket
 * @smrc_family: AF_MRC
 * @smrc_port: MRC port, network byte order; 0 in bind() picks a free one
 * @smrc_addr_family: AF_INET or AF_INET6: which member of @smrc_addr is used
 * @smrc_reserved: must be zero
 * @smrc_scope_id: IPv6 scope (interface index) for link-local addresses
 * @smrc_addr: IPv4 address (network byte order) or IPv6 address
 */
struct sockaddr_mrc {
	__kernel_sa_family_t	smrc_family;
	__be16			smrc_port;
	__u16			smrc_addr_family;
	__u16			smrc_reserved;
	__u32			smrc_scope_id;
	union {
		__be32		v4;
		__u8		v6[16];
	} smrc_addr;
};

/* Generic netlink family. */
#define MRC_GENL_NAME		"mrc"
#define MRC_GENL_VERSION	1

#endif /* _UAPI_LINUX_MRC_H */
