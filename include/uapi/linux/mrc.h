/* SPDX-License-Identifier: GPL-2.0 WITH Linux-syscall-note */
/*
 * MRC (Multi-path Reliable Connectivity): user API.
 *
 * Applications open sockets with socket(AF_MRC, SOCK_SEQPACKET, 0) (whole
 * messages) or socket(AF_MRC, SOCK_STREAM, 0) (a byte stream). AF_MRC is
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

/*
 * Socket options at level SOL_MRC. Other levels than SOL_MRC and SOL_SOCKET,
 * and unknown options, fail with ENOPROTOOPT; an optlen too short for the
 * value with EINVAL.
 *
 * MRC_HEARTBEAT_MS (__u32, 1..60000): probe interval of the idle paths of a
 *	connection with data in flight, in milliseconds. Defaults to the
 *	namespace's heartbeat_ms parameter. Set before connect() or listen()
 *	(accepted connections inherit it) or on a running connection.
 * MRC_CC (string, like TCP_CONGESTION): congestion controller of the
 *	connection's paths, "delay" or "reno" (unknown names: EINVAL). Defaults
 *	to the namespace's cc parameter. Set before connect() or listen()
 *	(accepted connections inherit it); EISCONN afterwards. getsockopt
 *	copies up to MRC_CC_NAME_MAX bytes of the NUL-padded name.
 * MRC_PATH_ADD (struct mrc_path_req, connected sockets only): adds a path.
 *	With setsockopt the new path id is not reported; with getsockopt the
 *	request is read from optval and written back with mpr_path_id set.
 *	ENOTCONN if not connected, ENOSPC if the path table is full, EEXIST
 *	if a path with the same addresses and ports exists.
 * MRC_PATH_DEL (__u32 path id, setsockopt, connected sockets only): removes
 *	a path; what was in flight on it is retransmitted on the others.
 *	ENOENT for an unknown id, EBUSY for the connection's last path.
 */
#define MRC_HEARTBEAT_MS	1
#define MRC_CC			2
#define MRC_PATH_ADD		3
#define MRC_PATH_DEL		4

/* Room for a congestion controller name, NUL included. */
#define MRC_CC_NAME_MAX		16

/* Largest MRC_HEARTBEAT_MS. */
#define MRC_HEARTBEAT_MS_MAX	60000

/* mrc_path_req.mpr_flags: the path is a backup, used only when no other is. */
#define MRC_PATH_F_BACKUP	1

/**
 * struct mrc_path_req - a path for MRC_PATH_ADD
 * @mpr_path_id: out: the new path's id (getsockopt); must be zero on input
 * @mpr_family: AF_INET or AF_INET6, the family of both addresses
 * @mpr_flags: MRC_PATH_F_BACKUP or zero
 * @mpr_sport: UDP source port (the path's entropy value), host byte order;
 *	zero picks one
 * @mpr_dport: the peer's UDP port, host byte order; zero means the MRC UDP
 *	port (module parameter "port")
 * @mpr_reserved: must be zero
 * @mpr_local: local IP address (IPv4 in the first 4 bytes, network byte
 *	order); all zero picks the route's source address
 * @mpr_remote: the peer's IP address, same layout
 */
struct mrc_path_req {
	__u32	mpr_path_id;
	__u16	mpr_family;
	__u16	mpr_flags;
	__u16	mpr_sport;
	__u16	mpr_dport;
	__u32	mpr_reserved;
	__u8	mpr_local[16];
	__u8	mpr_remote[16];
};

/* Largest message accepted by sendmsg() on a SOCK_SEQPACKET socket. */
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
