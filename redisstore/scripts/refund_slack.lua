-- refund_slack is how far, in µs, a refund's bound (see refund.lua) may be
-- off and still name the spend it bounds: a quarter of the period, at
-- least 2 ms. The bound comes from the caller's clock (what is left of a
-- ResetAfter), the refund reads the keys by Redis's: the two may drift
-- apart between the decision and the refund, and a fixed window's times
-- are whole ms. Loaded before the algorithm files in the refund script,
-- whose <name>_refund functions call it.
local function refund_slack(period)
  return math.max(math.floor(period / 4), 2000)
end
