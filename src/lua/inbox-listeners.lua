--[[
  inbox-listeners: how many connections listen on a sharded inbox channel on the master of its
  slot, the count a release's SPUBLISH would report. A manager's inbox asks it after the topology
  moved (failover, reshard, reconnect) to learn whether its subscription reached the channel's
  owner: a subscription left on a replica, or dropped, counts 0.

  KEYS[1]  lock key   not read: it routes the script to the master of the lock's slot, which
                      is the channel's ("<lock key>:inbox:<manager>" shares its hash tag)
  ARGV[1]  channel    the sharded channel

  Returns
    the number of subscribers of ARGV[1] on this node (PUBSUB SHARDNUMSUB)
]]
return redis.call('PUBSUB', 'SHARDNUMSUB', ARGV[1])[2]
