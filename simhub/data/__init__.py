"""Data: the QATD-2k loader (:mod:`~simhub.data.eedi`), the reader of the released annotation files
(:mod:`~simhub.data.annotations`), the shipped sample corpus (:mod:`~simhub.data.sample`) and dataset
statistics (:mod:`~simhub.data.stats`).

Nothing is imported here so that ``import simhub.data.stats`` does not pull in pandas.
"""
