-- The audit trail (docs/decisions/0021): inserted by the write it records, in its transaction;
-- read newest first; deleted only by retention.

-- name: audit_insert
INSERT INTO audit (id, tenant, at, actor, action, subject_kind, subject_id, subject_name, change)
VALUES (%(id)s, %(tenant)s, coalesce(%(now)s::timestamptz, clock_timestamp()), %(actor)s,
        %(action)s, %(subject_kind)s, %(subject_id)s, %(subject_name)s, %(change)s::text::jsonb);

-- name: audit_list
SELECT * FROM audit
WHERE tenant = %(tenant)s
  AND (%(actor)s::text IS NULL OR actor = %(actor)s::text)
  AND (%(action)s::text IS NULL OR action = %(action)s::text)
  AND (%(subject)s::text IS NULL OR subject_id = %(subject)s::text
       OR subject_name = %(subject)s::text)
  AND (%(since)s::timestamptz IS NULL OR at >= %(since)s::timestamptz)
  AND (%(until)s::timestamptz IS NULL OR at < %(until)s::timestamptz)
  AND (%(before_at)s::timestamptz IS NULL
       OR (at, id) < (%(before_at)s::timestamptz, %(before_id)s::uuid))
ORDER BY at DESC, id DESC
LIMIT %(limit)s;

-- name: audit_prune
DELETE FROM audit WHERE id IN (
    SELECT id FROM audit WHERE at < %(before)s ORDER BY at LIMIT %(limit)s
);
