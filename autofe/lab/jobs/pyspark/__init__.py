"""PySpark job scripts: each module is read as text and defines ``run(spark, params)``.

They are package data first and modules second; importing one is cheap (pyspark is imported
inside ``run``), so doctest collection and type checking treat them like any other module.
"""
