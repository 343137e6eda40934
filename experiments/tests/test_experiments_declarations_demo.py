"""The demo's declarations: the options it runs with are the ones its --help shows."""


def test_the_demo_takes_its_declared_options():
    from cfm_experiments import demo
    from cfm_experiments.declarations import demo as declared

    assert demo.OPTIONS is declared.OPTIONS
