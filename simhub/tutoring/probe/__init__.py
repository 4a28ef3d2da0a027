"""The ``sim-student`` learner family's wing: any simulated student, probed before and after a tutor
(:mod:`~simhub.tutoring.probe.bench`, :mod:`~simhub.tutoring.probe.family`)."""
