-- title: Silences
-- chart: table
-- description: Operators' silences in force at some point of the range (`halluwatch silence`): alerts matching every matcher are recorded as silenced and not sent. State is as of now; a silence expired early ends when it was expired. Silences that name no service or policy show whatever service or app is selected.
SELECT
    silence_id,
    arrayStringConcat(arraySort(arrayMap((key, value) -> concat(key, '=', value), mapKeys(matchers), mapValues(matchers))), ',') AS selector,
    multiIf(ends_at <= now(), 'ended', starts_at > now(), 'pending', 'active') AS state,
    reason,
    created_by,
    starts_at,
    ends_at
FROM halluwatch.silences FINAL
WHERE starts_at <= $__toTime AND ends_at >= $__fromTime
    AND $__conditionalAll(NOT mapContains(matchers, 'service') OR matchers['service'] IN (${service:singlequote}), $service)
    AND $__conditionalAll(NOT mapContains(matchers, 'policy') OR matchers['policy'] IN (${app:singlequote}), $app)
ORDER BY state = 'active' DESC, ends_at DESC
