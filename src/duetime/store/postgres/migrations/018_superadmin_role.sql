-- v18 (issue 22): a `superadmin` role manages the installation (every tenant's keys and
-- limits); `admin` keys now manage only their own tenant. Existing admin keys keep the name
-- `admin` and so become their tenant's admins (the upgrade step in the CHANGELOG: create a
-- superadmin key with `duetime keys create --role superadmin`). Rolling upgrade: the previous
-- release writes none of the new role.
ALTER TABLE api_keys DROP CONSTRAINT api_keys_role_check;
ALTER TABLE api_keys ADD CONSTRAINT api_keys_role_check
    CHECK (role IN ('viewer', 'operator', 'admin', 'superadmin'));
