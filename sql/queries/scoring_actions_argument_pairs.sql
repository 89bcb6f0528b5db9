-- step 6: the distinct (expected, called) argument pairs, compared in Python (subset or
-- exact, numbers by value). Fields: cand.
select distinct cast(eargs as varchar), cast(cargs as varchar) from {cand}
where eargs is not null and json_type(eargs) <> 'NULL'
