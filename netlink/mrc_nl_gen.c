// SPDX-License-Identifier: ((GPL-2.0 WITH Linux-syscall-note) OR BSD-3-Clause)
/* Do not edit directly, auto-generated from: */
/*	netlink/mrc.yaml */
/* YNL-GEN kernel source */

#include <net/netlink.h>
#include <net/genetlink.h>

#include "mrc_nl_gen.h"

#include <uapi/linux/mrc_netlink.h>

/* Integer value ranges */
static const struct netlink_range_validation mrc_a_params_data_per_idle_probe_range = {
	.max	= 65535ULL,
};

/* MRC_CMD_CONN_GET - do */
static const struct nla_policy mrc_conn_get_nl_policy[MRC_A_CONN_COOKIE + 1] = {
	[MRC_A_CONN_SESSION_ID] = { .type = NLA_UINT, },
	[MRC_A_CONN_COOKIE] = { .type = NLA_UINT, },
};

/* MRC_CMD_ENDPOINT_ADD - do */
static const struct nla_policy mrc_endpoint_add_nl_policy[MRC_A_ENDPOINT_FLAGS + 1] = {
	[MRC_A_ENDPOINT_ADDR] = { .type = NLA_BINARY, },
	[MRC_A_ENDPOINT_IFINDEX] = { .type = NLA_U32, },
	[MRC_A_ENDPOINT_FLAGS] = NLA_POLICY_MASK(NLA_U32, 0x1),
};

/* MRC_CMD_ENDPOINT_DEL - do */
static const struct nla_policy mrc_endpoint_del_nl_policy[MRC_A_ENDPOINT_IFINDEX + 1] = {
	[MRC_A_ENDPOINT_ADDR] = { .type = NLA_BINARY, },
	[MRC_A_ENDPOINT_IFINDEX] = { .type = NLA_U32, },
};

/* MRC_CMD_PARAM_SET - do */
static const struct nla_policy mrc_param_set_nl_policy[MRC_A_PARAMS_SYN_RETRY_PCT + 1] = {
	[MRC_A_PARAMS_HEARTBEAT_MS] = NLA_POLICY_MIN(NLA_U32, 1),
	[MRC_A_PARAMS_MISS_THRESHOLD] = NLA_POLICY_RANGE(NLA_U32, 1, 255),
	[MRC_A_PARAMS_EV_PER_PLANE] = NLA_POLICY_RANGE(NLA_U32, 1, 256),
	[MRC_A_PARAMS_CC] = { .type = NLA_NUL_STRING, .len = 15, },
	[MRC_A_PARAMS_USER_TIMEOUT_MS] = { .type = NLA_U32, },
	[MRC_A_PARAMS_DATA_PER_IDLE_PROBE] = NLA_POLICY_FULL_RANGE(NLA_U32, &mrc_a_params_data_per_idle_probe_range),
	[MRC_A_PARAMS_SYN_RETRY_PCT] = NLA_POLICY_MAX(NLA_U32, 100),
};

/* Ops table for mrc */
const struct genl_split_ops mrc_nl_ops[8] = {
	{
		.cmd	= MRC_CMD_STATS_GET,
		.doit	= mrc_nl_stats_get_doit,
		.flags	= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= MRC_CMD_CONN_GET,
		.doit		= mrc_nl_conn_get_doit,
		.policy		= mrc_conn_get_nl_policy,
		.maxattr	= MRC_A_CONN_COOKIE,
		.flags		= GENL_CMD_CAP_DO,
	},
	{
		.cmd	= MRC_CMD_CONN_GET,
		.dumpit	= mrc_nl_conn_get_dumpit,
		.flags	= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd		= MRC_CMD_ENDPOINT_ADD,
		.doit		= mrc_nl_endpoint_add_doit,
		.policy		= mrc_endpoint_add_nl_policy,
		.maxattr	= MRC_A_ENDPOINT_FLAGS,
		.flags		= GENL_UNS_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd		= MRC_CMD_ENDPOINT_DEL,
		.doit		= mrc_nl_endpoint_del_doit,
		.policy		= mrc_endpoint_del_nl_policy,
		.maxattr	= MRC_A_ENDPOINT_IFINDEX,
		.flags		= GENL_UNS_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
	{
		.cmd	= MRC_CMD_ENDPOINT_GET,
		.dumpit	= mrc_nl_endpoint_get_dumpit,
		.flags	= GENL_CMD_CAP_DUMP,
	},
	{
		.cmd	= MRC_CMD_PARAM_GET,
		.doit	= mrc_nl_param_get_doit,
		.flags	= GENL_CMD_CAP_DO,
	},
	{
		.cmd		= MRC_CMD_PARAM_SET,
		.doit		= mrc_nl_param_set_doit,
		.policy		= mrc_param_set_nl_policy,
		.maxattr	= MRC_A_PARAMS_SYN_RETRY_PCT,
		.flags		= GENL_UNS_ADMIN_PERM | GENL_CMD_CAP_DO,
	},
};

static const struct genl_multicast_group mrc_nl_mcgrps[] = {
	[MRC_NLGRP_EVENTS] = { "events", },
};
