/* SPDX-License-Identifier: GPL-2.0 */
/*
 * C side of mrc.ko: module parameters (C macros) and one-line wrappers
 * around static inline kernel functions. Everything else is Rust.
 */
#ifndef _MRC_HELPERS_H
#define _MRC_HELPERS_H

#include <linux/types.h>
#include <linux/ipv6.h>
#include <linux/netdevice.h>
#include <linux/netlink.h>
#include <linux/udp.h>

/* Room in front of an outgoing datagram for UDP, IPv6 and link headers. */
enum {
	MRC_TX_HEADROOM = LL_MAX_HEADER + sizeof(struct ipv6hdr) + sizeof(struct udphdr),
	/* Length of a netlink attribute header (NLA_HDRLEN). */
	MRC_NLA_HDRLEN = NLA_ALIGN(sizeof(struct nlattr)),
};

struct dst_entry;
struct genl_info;
struct netlink_callback;
struct nlattr;
struct net;
struct sk_buff;
struct sock;
struct seq_file;

int mrc_param_family(void);
u16 mrc_param_port(void);

void *mrc_net_generic(const struct net *net, unsigned int id);
struct net *mrc_sock_net(const struct sock *sk);
void *mrc_sk_user_data(const struct sock *sk);
void mrc_sk_clear_user_data(struct sock *sk);
bool mrc_pskb_may_pull(struct sk_buff *skb, unsigned int len);
void mrc_kfree_skb(struct sk_buff *skb);
void mrc_sock_orphan(struct sock *sk);
void mrc_sock_put(struct sock *sk);
void mrc_sock_hold(struct sock *sk);
struct net *mrc_seq_file_single_net(struct seq_file *seq);
unsigned char *mrc_skb_network_header(const struct sk_buff *skb);
void mrc_skb_reserve(struct sk_buff *skb, int len);
void *mrc_skb_put_data(struct sk_buff *skb, const void *data, unsigned int len);
int mrc_ip4_dst_hoplimit(const struct dst_entry *dst);
struct sk_buff *mrc_genlmsg_new(void);
void mrc_nlmsg_free(struct sk_buff *skb);
void mrc_genlmsg_end(struct sk_buff *skb, void *hdr);
int mrc_genlmsg_reply(struct sk_buff *skb, struct genl_info *info);
int mrc_nla_put_uint(struct sk_buff *skb, int attrtype, u64 value);
struct nlattr *mrc_nla_nest_start(struct sk_buff *skb, int attrtype);
void mrc_nla_nest_end(struct sk_buff *skb, struct nlattr *start);
struct net *mrc_genl_info_net(const struct genl_info *info);
struct net *mrc_genl_dump_net(const struct netlink_callback *cb);
u32 mrc_genl_dump_portid(const struct netlink_callback *cb);
void mrc_genl_dump_check_consistent(struct netlink_callback *cb, void *hdr);
void mrc_genlmsg_cancel(struct sk_buff *skb, void *hdr);

#endif /* _MRC_HELPERS_H */
