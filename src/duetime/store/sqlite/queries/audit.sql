-- The audit trail (docs/decisions/0021): inserted by the write it records, in its transaction;
-- read newest first; deleted only by retention.

-- name: audit_insert
INSERT INTO audit (id, tenant, at, actor, action, subject_kind, subject_id, subject_name, change)
VALUES (:id, :tenant, :now, :actor, :action, :subject_kind, :subject_id, :subject_name,
        :change);

-- name: audit_list
SELECT * FROM audit
WHERE tenant = :tenant
  AND (:actor IS NULL OR actor = :actor)
  AND (:action IS NULL OR action = :action)
  AND (:subject IS NULL OR subject_id = :subject OR subject_name = :subject)
  AND (:since IS NULL OR at >= :since)
  AND (:until IS NULL OR at < :until)
  AND (:before_at IS NULL OR (at, id) < (:before_at, :before_id))
ORDER BY at DESC, id DESC
LIMIT :limit;

-- name: audit_prune
DELETE FROM audit WHERE id IN (
    SELECT id FROM audit WHERE at < :before ORDER BY at LIMIT :limit
);
