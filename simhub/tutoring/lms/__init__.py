"""The ``kt-learner`` wing: EduClaw-Bench's KT-grounded learner, taught over days through an LMS.

:mod:`~simhub.tutoring.lms.family` (the family: options, run, rescore, report),
:mod:`~simhub.tutoring.lms.bench` (runs the kit's runner drives, day by day),
:mod:`~simhub.tutoring.lms.tutors` (the scripted tutors), :mod:`~simhub.tutoring.lms.results`,
:mod:`~simhub.tutoring.lms.report` and :mod:`~simhub.tutoring.lms.judges` (the day panel).
``docs/kt-learner.md`` describes the command.
"""
