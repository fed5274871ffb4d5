/* SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause) */
/* Do not edit directly, auto-generated from: */
/*	netlink/mrc.yaml */
/* YNL-GEN kernel header */

#ifndef _LINUX_MRC_GEN_H
#define _LINUX_MRC_GEN_H

#include <net/netlink.h>
#include <net/genetlink.h>

#include <uapi/linux/mrc_netlink.h>

/* Ops table for mrc */
extern const struct genl_split_ops mrc_nl_ops[8];

int mrc_nl_stats_get_doit(struct sk_buff *skb, struct genl_info *info);
int mrc_nl_conn_get_doit(struct sk_buff *skb, struct genl_info *info);
int mrc_nl_conn_get_dumpit(struct sk_buff *skb, struct netlink_callback *cb);
int mrc_nl_endpoint_add_doit(struct sk_buff *skb, struct genl_info *info);
int mrc_nl_endpoint_del_doit(struct sk_buff *skb, struct genl_info *info);
int mrc_nl_endpoint_get_dumpit(struct sk_buff *skb,
			       struct netlink_callback *cb);
int mrc_nl_param_get_doit(struct sk_buff *skb, struct genl_info *info);
int mrc_nl_param_set_doit(struct sk_buff *skb, struct genl_info *info);

enum {
	MRC_NLGRP_EVENTS,
};

#endif /* _LINUX_MRC_GEN_H */
