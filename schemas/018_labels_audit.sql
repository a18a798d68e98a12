-- Verdicts given in the review queue are an audit sample (pipeline/rate/): each keeps the
-- probability with which the sampler drew its call (its stratum's k-th of N calls: k / N) and the
-- stratum it was drawn from.  0 and '' for verdicts given elsewhere (an alert's trace page, Slack, a
-- label file): those calls were not drawn at random, and the rate estimate leaves them out.
ALTER TABLE {database}.labels
    ADD COLUMN IF NOT EXISTS inclusion_probability Float64 DEFAULT 0 AFTER withdrawn,
    ADD COLUMN IF NOT EXISTS stratum LowCardinality(String) DEFAULT '' AFTER inclusion_probability
