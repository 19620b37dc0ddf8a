--[[
  register-holder: note who a manager is (host, process, application), for operators and for
  the message of a wait that timed out. A manager's lease tokens start with its tag (8 hex
  digits), so the holder of any lock is found from the lock's token, with nothing written per
  lease: `latchkey status`, `latchkey list`, Locks.inspect and LockTimeoutError read it.

  KEYS[1]  registry key  string: "<prefix>holder:<tag>", the manager's description
  ARGV[1]  who           a description of the manager, e.g. "host-1 pid 4242"
  ARGV[2]  ttl           how long the entry lives, milliseconds (the manager writes it again
                         well before then while it holds or takes leases); "0": the manager
                         closed with none of its leases left: the entry is deleted

  Returns
    1  written (or deleted)
]]
if ARGV[2] == '0' then
  redis.call('DEL', KEYS[1])
else
  redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2])
end
return 1
