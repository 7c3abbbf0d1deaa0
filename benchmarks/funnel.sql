-- Where the gold passages are lost, per system, averaged over claims. Replace $RUNS with the quoted
-- run ids of the systems' predictions (a reused system keeps its first run's id), e.g. 'r1', 'r2'.
WITH gold AS (SELECT uid, list(DISTINCT pid) AS gp, list(DISTINCT pid::VARCHAR || ':' || sid::VARCHAR) AS gs FROM gold_facts GROUP BY uid),
hops AS (SELECT system, uid, flatten(list(retrieved_pids)) AS rp, flatten(list(stage1_pids)) AS sp FROM hop_traces WHERE run IN ($RUNS) GROUP BY ALL),
pred AS (SELECT system, uid, fact_pids, list_transform(list_zip(fact_pids, fact_sids), lambda x: x[1]::VARCHAR || ':' || x[2]::VARCHAR) AS fs FROM predictions WHERE run IN ($RUNS))
SELECT system, count(*) AS claims,
  round(avg(len(list_intersect(rp, gp)) / len(gp)), 3) AS gold_retrieved,
  round(avg(len(list_intersect(sp, gp)) / len(gp)), 3) AS in_stage1_top9,
  round(avg(len(list_intersect(fact_pids, gp)) / len(gp)), 3) AS in_final_facts,
  round(avg(len(list_intersect(fs, gs)) / len(gs)), 3) AS gold_sentences_kept,
  round(avg(len(fact_pids)), 1) AS final_facts
FROM hops JOIN pred USING (system, uid) JOIN gold USING (uid) GROUP BY system ORDER BY system;
