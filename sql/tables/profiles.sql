CREATE TABLE profiles (profile_of VARCHAR, component VARCHAR, sub_component VARCHAR, measure VARCHAR, scope VARCHAR,
  value DOUBLE, n BIGINT);
