"""A strict layer in front of moto: refuses what AWS refuses (see __main__)."""
